package integration

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Scale of TestMetadataAtScale (20,000 of each, in under a minute).
const (
	scaleTopics      = 20000
	scaleGroups      = 20000
	scaleBound       = time.Minute
	scaleConns       = 4   // pipelined connections
	scaleWindow      = 128 // requests in flight per connection
	scaleCodeGetAllT = 206 // GET_ALL_TOPIC_LIST_FROM_NAMESERVER
)

// TestMetadataAtScale: creating N topics or groups costs O(N) in all (topics.json and
// subscriptionGroup.json writes coalesced, registrations coalesced and compressed). 20,000
// topics are created with UPDATE_AND_CREATE_TOPIC over a few pipelined connections, and must all
// be in the name server's topic list (GET_ALL_TOPIC_LIST_FROM_NAMESERVER) within a minute of the
// first request; then 20,000 groups with UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, all in the
// broker's table within a minute. After a clean stop topics.json and subscriptionGroup.json hold
// every one of them. The figures are logged.
func TestMetadataAtScale(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	prefix := fmt.Sprintf("Scale%d_", os.Getpid()%100000)

	start := time.Now()
	err := pipelined(c.b.addr, scaleTopics, func(i int) (int, map[string]string, []byte) {
		return namesCodeUpdateTopic, map[string]string{"topic": prefix + "T" + strconv.Itoa(i), "readQueueNums": "1",
			"writeQueueNums": "1", "perm": "6", "topicFilterType": "SINGLE_TAG"}, nil
	})
	if err != nil {
		t.Fatalf("create topics: %v", err)
	}
	created := time.Since(start)
	var routed time.Duration
	eventually(t, scaleBound-created, "the name server lists every topic", func() error {
		n, err := namesrvTopicCount(c.ns.addr, prefix)
		if err != nil {
			return err
		}
		if n != scaleTopics {
			return fmt.Errorf("%d of %d topics listed", n, scaleTopics)
		}
		routed = time.Since(start)
		return nil
	})
	t.Logf("%d topics: created (all answered) in %v, all in the name server's list after %v (%.0f topics/s)",
		scaleTopics, created.Round(time.Millisecond), routed.Round(time.Millisecond), scaleTopics/routed.Seconds())
	if routed > scaleBound {
		t.Errorf("%d topics took %v, bound %v", scaleTopics, routed, scaleBound)
	}

	start = time.Now()
	err = pipelined(c.b.addr, scaleGroups, func(i int) (int, map[string]string, []byte) {
		body, _ := json.Marshal(map[string]any{"groupName": prefix + "G" + strconv.Itoa(i), "consumeEnable": true,
			"consumeBroadcastEnable": true, "retryQueueNums": 1, "retryMaxTimes": 16, "brokerId": 0, "whichBrokerWhenConsumeSlowly": 1})
		return namesCodeUpdateGroup, nil, body
	})
	if err != nil {
		t.Fatalf("create groups: %v", err)
	}
	groupsTook := time.Since(start)
	if n := countPrefixed(mustTableKeys(t, c.b.addr, namesCodeGetAllGroups, "subscriptionGroupTable"), prefix); n != scaleGroups {
		t.Errorf("the broker's group table has %d of %d groups", n, scaleGroups)
	}
	t.Logf("%d groups created (all answered) in %v (%.0f groups/s)", scaleGroups, groupsTook.Round(time.Millisecond), scaleGroups/groupsTook.Seconds())
	if groupsTook > scaleBound {
		t.Errorf("%d groups took %v, bound %v", scaleGroups, groupsTook, scaleBound)
	}

	// The coalesced writes are flushed at the latest at shutdown.
	if !c.b.signalAndWait(syscall.SIGTERM, 60*time.Second) {
		t.Fatalf("broker did not stop")
	}
	cfg := filepath.Join(c.b.storeRoot, "config")
	for file, want := range map[string]struct {
		table string
		n     int
	}{"topics.json": {"topicConfigTable", scaleTopics}, "subscriptionGroup.json": {"subscriptionGroupTable", scaleGroups}} {
		data, err := os.ReadFile(filepath.Join(cfg, file))
		if err != nil {
			t.Fatal(err)
		}
		if n := countPrefixed(jsonTableKeys(t, file, data, want.table), prefix); n != want.n {
			t.Errorf("%s holds %d of %d after a clean stop", file, n, want.n)
		}
	}
}

// namesrvTopicCount counts the topics starting with prefix in the name server's topic list
// (GET_ALL_TOPIC_LIST_FROM_NAMESERVER).
func namesrvTopicCount(nsAddr, prefix string) (int, error) {
	resp, err := rawRequest(nsAddr, scaleCodeGetAllT, nil, nil, 20*time.Second)
	if err != nil {
		return 0, err
	}
	var list struct {
		TopicList []string `json:"topicList"`
	}
	if err := json.Unmarshal(resp.Body, &list); err != nil {
		return 0, fmt.Errorf("topic list: %w", err)
	}
	return countPrefixed(list.TopicList, prefix), nil
}

func countPrefixed(names []string, prefix string) int {
	n := 0
	for _, s := range names {
		if len(s) > len(prefix) && s[:len(prefix)] == prefix {
			n++
		}
	}
	return n
}

// pipelined sends n requests (request i built by build) over scaleConns connections, each with
// up to scaleWindow requests in flight, and fails on the first answer other than SUCCESS.
func pipelined(addr string, n int, build func(i int) (int, map[string]string, []byte)) error {
	var wg sync.WaitGroup
	errs := make(chan error, scaleConns)
	for ci := 0; ci < scaleConns; ci++ {
		wg.Add(1)
		go func(ci int) {
			defer wg.Done()
			if err := pipelineOn(addr, ci, n, build); err != nil {
				errs <- err
			}
		}(ci)
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// pipelineOn sends requests ci, ci+scaleConns, ... of n on one connection.
func pipelineOn(addr string, ci, n int, build func(i int) (int, map[string]string, []byte)) error {
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(2 * scaleBound))
	var mine []int
	for i := ci; i < n; i += scaleConns {
		mine = append(mine, i)
	}
	slots := make(chan struct{}, scaleWindow)
	readErr := make(chan error, 1)
	go func() {
		for got := 0; got < len(mine); {
			resp, err := readFrame(conn)
			if err != nil {
				readErr <- err
				return
			}
			if resp.Flag&1 == 0 {
				continue // a request from the broker, not an answer
			}
			if resp.Code != respSuccess {
				readErr <- fmt.Errorf("answer code %d %q", resp.Code, resp.Remark)
				return
			}
			got++
			<-slots
		}
		readErr <- nil
	}()
	for _, i := range mine {
		select {
		case slots <- struct{}{}:
		case err := <-readErr:
			if err == nil {
				err = fmt.Errorf("reader ended early")
			}
			return err
		}
		code, ext, body := build(i)
		if _, err := conn.Write(encodeRequest(code, rawOpaque.Add(1), ext, body)); err != nil {
			return err
		}
	}
	return <-readErr
}
