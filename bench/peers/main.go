// Command peers compares xmq with other MQTT brokers on this machine. It is
// a nested module so that mochi-mqtt stays out of xmq's own dependencies.
//
//	peers mochi -addr 127.0.0.1:1884             # run mochi-mqtt v2 (TCP, allow all)
//	peers load -addr 127.0.0.1:1883 -mode ingest -pubs 10 -qos 0 -n 200000
//	peers load -addr 127.0.0.1:1883 -mode fanout -pubs 10 -subs 100 -n 5000
//
// The load side is deliberately simple (the full tool is cmd/loadtest): it
// writes PUBLISH packets as fast as the socket takes them, pipelines QoS 1
// with a window, and ends each publisher with a PINGREQ round trip so the
// time measured covers the broker processing every message, not just the
// kernel buffering them.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/hooks/auth"
	"github.com/mochi-mqtt/server/v2/listeners"

	"github.com/xmq-io/xmq/codec"
)

func main() {
	if len(os.Args) < 2 {
		log.Fatal("usage: peers mochi|load [flags]")
	}
	switch os.Args[1] {
	case "mochi":
		runMochi(os.Args[2:])
	case "load":
		runLoad(os.Args[2:])
	default:
		log.Fatalf("unknown command %q", os.Args[1])
	}
}

func runMochi(args []string) {
	fs := flag.NewFlagSet("mochi", flag.ExitOnError)
	addr := fs.String("addr", "127.0.0.1:1884", "TCP address")
	_ = fs.Parse(args)
	s := mqtt.New(&mqtt.Options{InlineClient: false})
	_ = s.AddHook(new(auth.AllowHook), nil)
	if err := s.AddListener(listeners.NewTCP(listeners.Config{ID: "t1", Address: *addr})); err != nil {
		log.Fatal(err)
	}
	if err := s.Serve(); err != nil {
		log.Fatal(err)
	}
	select {}
}

type conn struct {
	c net.Conn
	r *codec.Reader
	w *bufio.Writer
}

func dial(addr, id string) *conn {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		log.Fatal(err)
	}
	cn := &conn{c: c, r: codec.NewReader(bufio.NewReaderSize(c, 64<<10), 0), w: bufio.NewWriterSize(c, 64<<10)}
	cn.r.Version = codec.V311
	cn.send(&codec.Connect{ProtocolVersion: codec.V311, CleanStart: true, KeepAlive: 60, ClientID: []byte(id)})
	cn.flush()
	p, err := cn.r.ReadPacket()
	if err != nil {
		log.Fatalf("%s: connect: %v", id, err)
	}
	if ca, ok := p.(*codec.Connack); !ok || ca.ReasonCode != 0 {
		log.Fatalf("%s: connect refused: %v", id, p)
	}
	return cn
}

func (c *conn) send(p codec.Packet) {
	var b [256]byte
	if _, err := c.w.Write(p.Append(b[:0], codec.V311)); err != nil {
		log.Fatal(err)
	}
}

func (c *conn) flush() {
	if err := c.w.Flush(); err != nil {
		log.Fatal(err)
	}
}

func runLoad(args []string) {
	fs := flag.NewFlagSet("load", flag.ExitOnError)
	addr := fs.String("addr", "127.0.0.1:1883", "broker TCP address")
	mode := fs.String("mode", "ingest", "ingest (publishers only) or fanout (publishers → subscribers on one topic)")
	pubs := fs.Int("pubs", 10, "publishers")
	subs := fs.Int("subs", 0, "subscribers (fanout)")
	qos := fs.Int("qos", 0, "QoS of publishes and subscriptions")
	n := fs.Int("n", 100000, "messages per publisher")
	payload := fs.Int("payload", 64, "payload bytes")
	window := fs.Int("inflight", 64, "QoS 1 publishes in flight per publisher")
	wait := fs.Duration("wait", 10*time.Second, "how long to wait for deliveries after publishing")
	_ = fs.Parse(args)

	var delivered atomic.Int64
	var subWG sync.WaitGroup
	var subConns []*conn
	if *mode == "fanout" {
		for i := 0; i < *subs; i++ {
			c := dial(*addr, fmt.Sprintf("peers-sub-%d", i))
			c.send(&codec.Subscribe{PacketID: 1, Subscriptions: []codec.Subscription{{Filter: []byte("peers/t"), QoS: byte(*qos)}}})
			c.flush()
			subConns = append(subConns, c)
			subWG.Add(1)
			go func() {
				defer subWG.Done()
				for {
					p, err := c.r.ReadPacket()
					if err != nil {
						return
					}
					if pp, ok := p.(*codec.Publish); ok {
						delivered.Add(1)
						if pp.QoS == 1 {
							c.send(&codec.Ack{Kind: codec.PUBACK, PacketID: pp.PacketID})
							if c.r.Buffered() == 0 {
								c.flush()
							}
						}
					}
				}
			}()
		}
		time.Sleep(200 * time.Millisecond) // let SUBACKs land
	}
	topic := []byte("peers/t")
	body := make([]byte, *payload)
	start := time.Now()
	var pubWG sync.WaitGroup
	for i := 0; i < *pubs; i++ {
		c := dial(*addr, fmt.Sprintf("peers-pub-%d", i))
		if *mode == "ingest" {
			topic = []byte(fmt.Sprintf("peers/t/%d", i))
		}
		pubWG.Add(1)
		go func(topic []byte) {
			defer pubWG.Done()
			publish(c, topic, body, byte(*qos), *n, *window)
		}(topic)
	}
	pubWG.Wait()
	pubDur := time.Since(start)
	total := float64(*pubs * *n)
	fmt.Printf("mode=%s pubs=%d subs=%d qos=%d payload=%d: published %.0f msgs in %v = %.0f msg/s\n",
		*mode, *pubs, *subs, *qos, *payload, total, pubDur.Round(time.Millisecond), total/pubDur.Seconds())
	if *mode == "fanout" {
		want := int64(total) * int64(*subs)
		deadline := time.Now().Add(*wait)
		for delivered.Load() < want && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		dur := time.Since(start)
		got := delivered.Load()
		fmt.Printf("delivered %d of %d (%.1f%%) in %v = %.0f deliveries/s\n", got, want,
			100*float64(got)/float64(want), dur.Round(time.Millisecond), float64(got)/dur.Seconds())
		for _, c := range subConns {
			_ = c.c.Close()
		}
		subWG.Wait()
	}
}

// publish sends n messages and returns once the broker has processed them
// all: QoS 0 ends with a PINGREQ/PINGRESP round trip, QoS 1 with the last PUBACK.
func publish(c *conn, topic, body []byte, qos byte, n, window int) {
	acks := make(chan struct{}, window)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			p, err := c.r.ReadPacket()
			if err != nil {
				log.Fatalf("publisher read: %v", err)
			}
			switch p.Type() {
			case codec.PUBACK:
				<-acks
			case codec.PINGRESP:
				return
			}
		}
	}()
	p := &codec.Publish{Topic: topic, Payload: body, QoS: qos}
	id := uint16(0)
	for i := 0; i < n; i++ {
		if qos > 0 {
			select {
			case acks <- struct{}{}:
			default:
				c.flush()
				acks <- struct{}{}
			}
			id++
			if id == 0 {
				id = 1
			}
			p.PacketID = id
		}
		c.send(p)
	}
	for qos > 0 && len(acks) > 0 {
		c.flush()
		time.Sleep(100 * time.Microsecond)
	}
	c.send(&codec.Pingreq{})
	c.flush()
	<-done
	_ = c.c.Close()
}
