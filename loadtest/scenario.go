package loadtest

import (
	"fmt"
	"math"
	"sort"
	"strconv"
)

// Scenario is a published load test reproduced by name, in the MQTT 3.1.1
// it was published with. Its settings are
// command-line flags, so a report shows exactly what ran and any flag given
// after -scenario overrides the scenario's.
type Scenario struct {
	Name   string
	Source string // who published it
	About  string
	// Args returns the scenario's flags with every population multiplied
	// by scale (at least 1): a 50,000-client case at -scale 0.01 runs 500.
	Args func(scale float64) []string
}

func scaled(n int, scale float64) string {
	return strconv.Itoa(max(1, int(math.Round(float64(n)*scale))))
}

// Scenarios are the published cases, by name.
var Scenarios = map[string]Scenario{
	"p2p-50K-50K-50K-50K": {
		Name: "p2p-50K-50K-50K-50K", Source: "Open MQTT Benchmark Suite",
		About: "50K publishers → 50K subscribers, one topic per pair, 1 msg/s each (50K msg/s), QoS 1, 16 B, 30 min",
		Args: func(s float64) []string {
			n := scaled(50000, s)
			return []string{"-mqtt", "3.1.1", "-mode", "p2p", "-pubs", n, "-qos", "1", "-payload", "16", "-rate", "1",
				"-topic", "bench/p2p/%i", "-clean=true", "-duration", "30m"}
		},
	},
	"fanout-5-1000-5-250K": {
		Name: "fanout-5-1000-5-250K", Source: "Open MQTT Benchmark Suite",
		About: "5 publishers on 5 topics at 50 msg/s each → 1,000 subscribers to all 5 (250K deliveries/s), QoS 1, 16 B, 30 min",
		Args: func(s float64) []string {
			return []string{"-mqtt", "3.1.1", "-mode", "pubsub", "-pubs", "5", "-subs", scaled(1000, s), "-qos", "1", "-payload", "16",
				"-rate", "50", "-topic", "bench/fanout/%i", "-duration", "30m"}
		},
	},
	"sharesub-50K-500-50K-50K": {
		Name: "sharesub-50K-500-50K-50K", Source: "Open MQTT Benchmark Suite",
		About: "50K publishers on 50K topics at 1 msg/s → 500 subscribers sharing $share/benchmark/test/#, QoS 1, 16 B, 30 min",
		Args: func(s float64) []string {
			return []string{"-mqtt", "3.1.1", "-mode", "fanin", "-pubs", scaled(50000, s), "-subs", scaled(500, s), "-qos", "1",
				"-payload", "16", "-rate", "1", "-topic", "test/%i", "-sub-topic", "$share/benchmark/test/#",
				"-duration", "30m"}
		},
	},
	"conn-tcp-1M-5K": {
		Name: "conn-tcp-1M-5K", Source: "Open MQTT Benchmark Suite",
		About: "1M TCP connections opened at 5K/s, held, checked with PINGREQ",
		Args: func(s float64) []string {
			return []string{"-mqtt", "3.1.1", "-mode", "conn", "-transport", "tcp", "-levels", scaled(1000000, s), "-conn-rate", "5000",
				"-dial-concurrency", "500", "-hold", "60s"}
		},
	},
	"ws-conn-unique-topic": {
		Name: "ws-conn-unique-topic", Source: "EMQX 2M WebSocket connections test",
		About: "one WebSocket connection per client subscribed to its own topic t/%i at QoS 1, each sending one 256 B message to it every 10 s",
		Args: func(s float64) []string {
			return []string{"-mqtt", "3.1.1", "-mode", "p2p", "-loop", "-transport", "ws", "-pubs", scaled(2000000, s), "-qos", "1",
				"-payload", "256", "-rate", "0.1", "-topic", "t/%i", "-clean=true", "-duration", "10m"}
		},
	},
	"p2p-persistent": {
		Name: "p2p-persistent", Source: "TBMQ persistent point-to-point test",
		About: "publisher i → europe/ua/kyiv/i → persistent subscriber i (clean session false), QoS 1, 62 B, 1 msg/s each",
		Args: func(s float64) []string {
			return []string{"-mqtt", "3.1.1", "-mode", "p2p", "-pubs", scaled(1000000, s), "-qos", "1", "-payload", "62", "-rate", "1",
				"-topic", "europe/ua/kyiv/%i", "-clean=false", "-duration", "10m"}
		},
	},
}

// ScenarioHelp lists the scenarios, one per line.
func ScenarioHelp() string {
	names := make([]string, 0, len(Scenarios))
	for n := range Scenarios {
		names = append(names, n)
	}
	sort.Strings(names)
	s := ""
	for _, n := range names {
		sc := Scenarios[n]
		s += fmt.Sprintf("  %-25s %s (%s)\n", n, sc.About, sc.Source)
	}
	return s
}
