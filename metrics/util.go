package metrics

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

func itoa(v int32) string { return strconv.FormatInt(int64(v), 10) }

// Emitter sends constant metrics to a collector's channel, turning construction errors into
// invalid metrics so one bad value does not hide the rest of a scrape.
type Emitter struct {
	Ch chan<- prometheus.Metric
}

// Counter emits a counter.
func (e Emitter) Counter(d *prometheus.Desc, v float64, labelValues ...string) {
	e.emit(d, prometheus.CounterValue, v, labelValues)
}

// Gauge emits a gauge.
func (e Emitter) Gauge(d *prometheus.Desc, v float64, labelValues ...string) {
	e.emit(d, prometheus.GaugeValue, v, labelValues)
}

// Histogram emits h's current state.
func (e Emitter) Histogram(d *prometheus.Desc, h *Histogram, labelValues ...string) {
	m, err := h.Metric(d, labelValues...)
	if err != nil {
		m = prometheus.NewInvalidMetric(d, err)
	}
	e.Ch <- m
}

func (e Emitter) emit(d *prometheus.Desc, t prometheus.ValueType, v float64, labelValues []string) {
	m, err := prometheus.NewConstMetric(d, t, v, labelValues...)
	if err != nil {
		m = prometheus.NewInvalidMetric(d, err)
	}
	e.Ch <- m
}

// Desc builds a descriptor without constant labels (the registry adds the identity labels).
func Desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(name, help, labels, nil)
}
