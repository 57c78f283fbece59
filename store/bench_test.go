package store_test

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/xmq-io/xmq/store"
)

// BenchmarkPutDelete is the store's work for one QoS 1 message to a
// persistent session: put it, then delete it once acknowledged. No Sync:
// that is BenchmarkGroupCommit's.
func BenchmarkPutDelete(b *testing.B) {
	payload := []byte(strings.Repeat("p", 62+40)) // a 62-byte message and its record header
	st := openPebble(b, b.TempDir(), store.Options{Durability: store.DurabilityNone})
	b.ReportAllocs()
	b.ResetTimer()
	for i := range uint64(b.N) {
		if err := st.PutMessage("client-0001", i, payload); err != nil {
			b.Fatal(err)
		}
		if err := st.DeleteMessage("client-0001", i); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkGroupCommit: callers goroutines each put a message and Sync, as
// connections acknowledging QoS 1 messages do in sync mode. One op is one
// message made durable; fsyncs/op shows how many callers share each fsync.
func BenchmarkGroupCommit(b *testing.B) {
	payload := []byte(strings.Repeat("p", 102))
	for _, callers := range []int{1, 8, 64, 256} {
		b.Run(fmt.Sprintf("callers=%d", callers), func(b *testing.B) {
			st := openPebble(b, b.TempDir(), store.Options{})
			var next atomic.Uint64
			before := st.Syncs()
			b.ResetTimer()
			var wg sync.WaitGroup
			for c := range callers {
				wg.Go(func() {
					id := fmt.Sprint("client-", c)
					for {
						i := next.Add(1)
						if i > uint64(b.N) {
							return
						}
						if err := st.PutMessage(id, i, payload); err != nil {
							b.Error(err)
							return
						}
						if err := st.Sync(); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			b.StopTimer()
			b.ReportMetric(float64(st.Syncs()-before)/float64(b.N), "fsyncs/op")
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
		})
	}
}
