package core_test

import (
	"bufio"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/xmq-io/xmq/codec"
	"github.com/xmq-io/xmq/core"
)

// mosquittoSysTopics reads the topic list captured from Mosquitto 2.0.
func mosquittoSysTopics(t *testing.T) []string {
	t.Helper()
	f, err := os.Open("testdata/mosquitto-2.0-sys-topics.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if line := sc.Text(); line != "" && !strings.HasPrefix(line, "#") {
			out = append(out, line)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// xmqOnlySysTopics are the $SYS topics xmq publishes beyond Mosquitto's,
// with why.
var xmqOnlySysTopics = map[string]string{
	"$SYS/broker/publish/messages/quota_exceeded": "QoS 1/2 messages refused for a full session queue or store (Quota Exceeded), apart from the other drops",
	"$SYS/broker/publish/messages/store_error":    "QoS 1/2 messages refused because the store failed to record them",
}

// sysFeed subscribes to $SYS/broker/# and keeps the last value of each
// topic.
type sysFeed struct {
	t      *testing.T
	c      *tconn
	values map[string]string
	counts map[string]int // messages seen per topic
}

func newSysFeed(t *testing.T, srv *core.Server) *sysFeed {
	t.Helper()
	c := client(t, srv, codec.V311, "sys-feed")
	c.Subscribe(0, "$SYS/broker/#")
	return &sysFeed{t: t, c: c, values: map[string]string{}, counts: map[string]int{}}
}

// until reads $SYS messages until cond holds on the values seen, or fails
// after a few seconds.
func (f *sysFeed) until(what string, cond func(v map[string]string) bool) {
	f.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond(f.values) {
		if time.Now().After(deadline) {
			f.t.Fatalf("$SYS: timed out waiting for %s; last values: %v", what, f.values)
		}
		p, ok := f.c.Next().(*codec.Publish)
		if !ok {
			f.t.Fatal("$SYS subscriber got a packet that is not a PUBLISH")
		}
		k := strings.TrimPrefix(string(p.Topic), "$SYS/broker/")
		f.values[k] = string(p.Payload)
		f.counts[k]++
	}
}

// is waits until every key has its value.
func (f *sysFeed) is(want map[string]string) {
	f.t.Helper()
	f.until("values "+strconv.Quote(strings.Join(sortedPairs(want), ", ")), func(v map[string]string) bool {
		for k, w := range want {
			if v[k] != w {
				return false
			}
		}
		return true
	})
}

func sortedPairs(m map[string]string) []string {
	var out []string
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	slices.Sort(out)
	return out
}

// TestSysTopicsMatchMosquitto: xmq publishes every $SYS topic that
// Mosquitto 2.0 publishes (testdata, from a real run), and nothing else
// but the topics listed in xmqOnlySysTopics.
func TestSysTopicsMatchMosquitto(t *testing.T) {
	srv := newServer(t, core.Options{SysInterval: 20 * time.Millisecond, Version: "test"}, core.Config{})
	feed := newSysFeed(t, srv)
	// Every topic is published on each round, uptime second: three
	// uptimes span two whole rounds at least.
	feed.until("three rounds", func(map[string]string) bool { return feed.counts["uptime"] >= 3 })
	var got []string
	for k := range feed.values {
		got = append(got, "$SYS/broker/"+k)
	}
	slices.Sort(got)
	want := mosquittoSysTopics(t)
	if len(want) < 50 {
		t.Fatalf("testdata holds %d topics: not a Mosquitto 2.0 capture", len(want))
	}
	for _, topic := range want {
		if !slices.Contains(got, topic) {
			t.Errorf("Mosquitto publishes %s; xmq does not", topic)
		}
	}
	for _, topic := range got {
		if !slices.Contains(want, topic) && xmqOnlySysTopics[topic] == "" {
			t.Errorf("xmq publishes %s, which Mosquitto 2.0 does not and xmqOnlySysTopics does not explain", topic)
		}
	}
	if v := feed.values["version"]; v != "xmq version test" {
		t.Errorf("version %q, want %q (Mosquitto: \"mosquitto version 2.0.11\")", v, "xmq version test")
	}
	for _, k := range []string{"load/messages/received/1min", "load/connections/15min", "load/bytes/sent/5min"} {
		if _, err := strconv.ParseFloat(feed.values[k], 64); err != nil || !strings.Contains(feed.values[k], ".") {
			t.Errorf("%s = %q, want a number with two decimals as Mosquitto prints", k, feed.values[k])
		}
	}
}

// TestSysClientsAndStore checks the meaning of the clients/*, store and
// count topics, which follow Mosquitto's: clients are sessions,
// clients/maximum is the most connected at once, expired counts sessions
// ended by their expiry, messages/received counts packets of every type.
func TestSysClientsAndStore(t *testing.T) {
	srv := newServer(t, core.Options{SysInterval: 20 * time.Millisecond}, core.Config{})
	feed := newSysFeed(t, srv)
	leave := func(c *tconn) {
		t.Helper()
		c.Send(&codec.Disconnect{})
		c.ExpectClosed()
		// Gone on the broker's side too, before the next one connects:
		// clients/maximum counts connections open at once.
		waitFor(t, "the connection to end", func() bool { return srv.Stats().Connected == 2 })
	}
	a := client(t, srv, codec.V311, "a")
	b := client(t, srv, codec.V5, "b")
	// The feed, a and b were connected at once.
	feed.is(map[string]string{"clients/connected": "3", "clients/maximum": "3"})
	leave(b)
	// A 3.1.1 persistent session, offline, with a QoS 1 message queued; an
	// MQTT 5 one with a one-second expiry, which expires.
	keep := client(t, srv, codec.V311, "keep", persistent)
	keep.Subscribe(1, "q/#", "$share/g/s/#")
	leave(keep)
	brief := client(t, srv, codec.V5, "brief", func(p *codec.Connect) {
		p.CleanStart = false
		p.Props.SetNum(codec.PropSessionExpiry, 1)
	})
	leave(brief)
	a.Pub("q/1", "12345", 1)
	a.PubRetained("r/1", "kept", 0)
	feed.is(map[string]string{
		"clients/connected":          "2", // feed, a
		"clients/active":             "2",
		"clients/disconnected":       "2", // keep, brief
		"clients/inactive":           "2",
		"clients/total":              "4",
		"clients/maximum":            "3",
		"subscriptions/count":        "3", // the feed's, keep's two
		"shared_subscriptions/count": "1",
	})
	feed.is(map[string]string{"clients/expired": "1", "clients/disconnected": "1", "clients/total": "3"})
	// Stored: keep's queued message and every retained one, the broker's
	// $SYS topics included, as Mosquitto counts them.
	feed.until("store counts", func(v map[string]string) bool {
		retained, _ := strconv.Atoi(v["retained messages/count"])
		st := srv.Stats()
		return retained == st.Retained+st.SysRetained && st.Retained == 1 && st.SysRetained > 40 &&
			v["store/messages/count"] == strconv.Itoa(retained+1) && v["messages/stored"] == v["store/messages/count"]
	})
	// Bytes held: keep's message (topic and payload) and the retained
	// ones, whose $SYS values change size from round to round.
	if ci, _ := srv.Client("keep"); ci.QueuedBytes != int64(len("q/1")+len("12345")) || srv.QueuedBytes() < ci.QueuedBytes {
		t.Errorf("keep holds %d bytes, all sessions %d: want keep's message, %d", ci.QueuedBytes, srv.QueuedBytes(), len("q/1")+len("12345"))
	}
	feed.until("store bytes", func(v map[string]string) bool {
		n, _ := strconv.ParseInt(v["store/messages/bytes"], 10, 64)
		return n > srv.QueuedBytes()+int64(len("r/1")+len("kept"))
	})
	// The payload bytes of a's two PUBLISH packets.
	feed.is(map[string]string{"publish/bytes/received": strconv.Itoa(len("12345") + len("kept"))})
	feed.until("heap", func(v map[string]string) bool {
		cur, err1 := strconv.ParseUint(v["heap/current"], 10, 64)
		top, err2 := strconv.ParseUint(v["heap/maximum"], 10, 64)
		return err1 == nil && err2 == nil && cur > 0 && top >= cur
	})
	feed.until("a connection load", func(v map[string]string) bool {
		n, err := strconv.ParseFloat(v["load/connections/1min"], 64)
		return err == nil && n > 0
	})
}

// TestPacketCounts: the packet counters behind $SYS messages/received and
// messages/sent count MQTT packets of every type, each way.
func TestPacketCounts(t *testing.T) {
	srv := newServer(t, core.Options{}, core.Config{})
	s := client(t, srv, codec.V311, "s") // in: CONNECT; out: CONNACK
	s.Subscribe(1, "t/#")                // SUBSCRIBE; SUBACK
	a := client(t, srv, codec.V5, "a")   // CONNECT; CONNACK
	a.Pub("t/x", "hi", 1)                // PUBLISH; PUBACK and the PUBLISH to s
	wantPayloads(t, s.Recv(1), "hi")     // s's PUBACK
	a.Send(&codec.Pingreq{})             // PINGREQ; PINGRESP
	expect[*codec.Pingresp](a)
	want := core.Snapshot{PacketsIn: 6, PacketsOut: 6, MessagesIn: 1, MessagesOut: 1, ConnectPackets: 2,
		PublishBytesIn: 2, PublishBytesOut: 2}
	waitFor(t, "the counts", func() bool {
		st := srv.Stats()
		return st.PacketsIn == want.PacketsIn && st.PacketsOut == want.PacketsOut && st.MessagesIn == want.MessagesIn &&
			st.MessagesOut == want.MessagesOut && st.ConnectPackets == want.ConnectPackets &&
			st.PublishBytesIn == want.PublishBytesIn && st.PublishBytesOut == want.PublishBytesOut
	})
	if st := srv.Stats(); st.ConnectsByListener["pipe"] != 2 || st.Connects != 2 {
		t.Errorf("connects %d, by listener %v: want 2 on pipe", st.Connects, st.ConnectsByListener)
	}
}

// TestSysExtraTopics: Config.SysTopics's topics go out under $SYS/broker/
// with the broker's own, read again on every round.
func TestSysExtraTopics(t *testing.T) {
	var n atomic.Int64
	srv := newServer(t, core.Options{SysInterval: 20 * time.Millisecond}, core.Config{SysTopics: func() [][2]string {
		return [][2]string{{"cluster/nodes/total", strconv.FormatInt(n.Add(1), 10)}}
	}})
	f := newSysFeed(t, srv)
	f.until("cluster/nodes/total beyond 2", func(v map[string]string) bool {
		got, _ := strconv.Atoi(v["cluster/nodes/total"])
		return got > 2 && v["uptime"] != ""
	})
}
