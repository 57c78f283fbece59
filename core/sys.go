package core

import (
	"strconv"
	"time"
)

// sysLoop publishes $SYS/broker/... every SysInterval, retained, in the
// layout Mosquitto users know.
func (s *Server) sysLoop() {
	defer close(s.sysDone)
	if s.opts.SysInterval < 0 {
		<-s.stopSys
		return
	}
	s.publishSys()
	t := time.NewTicker(s.opts.SysInterval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			s.publishSys()
		case <-s.stopSys:
			return
		}
	}
}

func (s *Server) publishSys() {
	snap := s.Stats()
	i := func(n int64) string { return strconv.FormatInt(n, 10) }
	uptime := int64(time.Since(s.started) / time.Second)
	for _, kv := range [...][2]string{
		{"version", "xmq " + s.opts.Version},
		{"uptime", i(uptime) + " seconds"},
		{"clients/connected", i(snap.Connected)},
		{"clients/total", i(int64(snap.Sessions))},
		{"clients/disconnected", i(max(int64(snap.Sessions)-snap.Connected, 0))},
		{"clients/maximum", i(int64(s.opts.MaxConnections))},
		{"messages/received", i(snap.MessagesIn)},
		{"messages/sent", i(snap.MessagesOut)},
		{"publish/messages/received", i(snap.MessagesIn)},
		{"publish/messages/sent", i(snap.MessagesOut)},
		{"publish/messages/dropped", i(snap.TotalDropped())},
		{"publish/messages/quota_exceeded", i(snap.Dropped["quota_exceeded"])},
		{"publish/messages/store_error", i(snap.Dropped["store_error"])},
		{"bytes/received", i(snap.BytesIn)},
		{"bytes/sent", i(snap.BytesOut)},
		{"subscriptions/count", i(snap.Subscriptions)},
		{"retained messages/count", i(int64(snap.Retained))},
	} {
		_ = s.Publish("$SYS/broker/"+kv[0], []byte(kv[1]), 0, true)
	}
}
