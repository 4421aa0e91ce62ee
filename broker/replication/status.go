package replication

import (
	"strconv"

	"rocketraft/protocol"
)

// Status is GET_BROKER_HA_STATUS's answer.
func (s *Service) Status() protocol.HARuntimeInfo {
	var info protocol.HARuntimeInfo
	info.HAConnectionInfo = []protocol.HAConnectionRuntimeInfo{}
	info.HAClientRuntimeInfo.MasterOffset = -1
	src := source{s.cfg.Acquire}
	if srv := s.server.Load(); srv != nil {
		masterMax, _ := src.CommitLogMaxOffset()
		info.Master = true
		info.MasterCommitLogMaxOffset = masterMax
		for _, c := range srv.Status() {
			in := srv.InSync(c, masterMax)
			if in {
				info.InSyncSlaveNums++
			}
			diff := int64(-1)
			if c.AckOffset >= 0 {
				diff = max(0, masterMax-c.AckOffset)
			}
			info.HAConnectionInfo = append(info.HAConnectionInfo, protocol.HAConnectionRuntimeInfo{
				Addr: c.Addr, SlaveAckOffset: c.AckOffset, Diff: diff, InSync: in,
				TransferredByteInSecond: int64(c.BytesPerSecond), TransferFromWhere: c.TransferFrom,
			})
		}
	} else if s.cfg.Role == Master || s.cfg.Role == SyncMaster {
		info.Master = true // a classic master whose server failed to start: no slaves
	}
	if !info.Master {
		info.HAClientRuntimeInfo.MaxOffset, _ = src.CommitLogMaxOffset()
	}
	if c := s.client.Load(); c != nil {
		st := c.Status()
		info.HAClientRuntimeInfo = protocol.HAClientRuntimeInfo{
			MasterAddr: st.MasterAddr, TransferredByteInSecond: int64(st.BytesPerSecond), MaxOffset: st.MaxOffset,
			LastReadTimestamp: st.LastRead.UnixMilli(), LastWriteTimestamp: st.LastWrite.UnixMilli(),
			IsActivated: st.Connected, MasterOffset: st.MasterOffset,
		}
	}
	return info
}

// AddRuntimeInfo adds the replication keys to GET_BROKER_RUNTIME_INFO: on a master the
// connected slaves and the furthest-behind one; on a slave its master and how far behind it is.
func (s *Service) AddRuntimeInfo(table map[string]string) {
	i64 := func(n int64) string { return strconv.FormatInt(n, 10) }
	info := s.Status()
	if srv := s.server.Load(); srv != nil {
		table["haServerAddr"] = s.AdvertisedAddr()
		table["haConnections"] = strconv.Itoa(len(info.HAConnectionInfo))
		table["haInSyncSlaves"] = strconv.Itoa(info.InSyncSlaveNums)
		behind := int64(0)
		for _, c := range info.HAConnectionInfo {
			if c.Diff < 0 {
				behind = max(behind, info.MasterCommitLogMaxOffset)
			} else {
				behind = max(behind, c.Diff)
			}
		}
		table["haSlaveFallBehindMax"] = i64(behind)
	}
	if s.client.Load() != nil {
		haAddr, addr := s.masterAddrs()
		if s.cfg.Broker.HAMasterAddress != "" {
			haAddr = s.cfg.Broker.HAMasterAddress
		}
		c := info.HAClientRuntimeInfo
		table["masterAddr"] = addr
		table["masterHaAddr"] = haAddr
		table["haConnected"] = strconv.FormatBool(c.IsActivated)
		table["slaveMaxOffset"] = i64(c.MaxOffset)
		table["masterOffsetSeen"] = i64(c.MasterOffset)
		table["slaveFallBehind"] = i64(max(0, c.MasterOffset-c.MaxOffset))
	}
}
