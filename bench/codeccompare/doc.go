// Package codeccompare benchmarks the xmq codec against two other Go MQTT
// packet codecs, github.com/mochi-mqtt/server/v2/packets and
// github.com/eclipse/paho.golang/packets, decoding and encoding the same
// PUBLISH bytes (codectest.PublishBenches). It is a separate module so that
// those libraries stay out of the broker's go.mod.
//
// Run it from this directory (GOFLAGS=-mod=mod, or go mod tidy, if the
// broker's go.mod has moved on since go.sum was written):
//
//	for i in 1 2 3 4 5 6; do go test -run '^$' -bench . -benchmem -benchtime 0.3s; done | tee new.txt
//	go run golang.org/x/perf/cmd/benchstat@latest -col /impl new.txt
//
// Separate runs rather than -count 6 interleave the libraries, which keeps a
// busy machine from favouring whichever ran in a quiet moment. results.txt
// holds the raw output of the last such run that was reported (2 shared
// cores, AMD EPYC, go1.26).
//
// Every implementation reads from a bufio.Reader over a stream repeating the
// packet, so framing (fixed header, remaining length) is part of the cost.
// mochi is given a reused body buffer; its server additionally allocates and
// copies the body per packet, which is not measured here. paho speaks MQTT 5
// only, so it has no 3.1.1 cases. TestSameMeaning checks that each library
// decodes the bytes to the same packet and that their encodings decode, with
// the xmq codec, to the same packet.
package codeccompare
