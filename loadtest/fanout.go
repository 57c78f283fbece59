package loadtest

import (
	"github.com/xmq-io/xmq/codec"
)

// fanout says how many receivers each publisher's messages should reach:
// every subscriber whose filter matches the publisher's topic, a shared
// group counting once. The expected delivery count, and so the loss, comes
// from it.
type fanout struct {
	o      *Options
	perPub []int32 // by publisher number, computed on first use; -1 = not yet
}

func newFanout(o *Options) *fanout {
	f := &fanout{o: o, perPub: make([]int32, o.Pubs)}
	for i := range f.perPub {
		f.perPub[i] = -1
	}
	return f
}

// of is the number of receivers publisher i should reach.
func (f *fanout) of(i int) int {
	if i < 0 || i >= len(f.perPub) {
		return 0
	}
	if f.perPub[i] < 0 {
		f.perPub[i] = int32(f.compute(i))
	}
	return int(f.perPub[i])
}

func (f *fanout) compute(i int) int {
	o := f.o
	switch o.Mode {
	case ModeP2P:
		return 1
	case ModePubSub, ModeFanIn:
	default:
		return 0
	}
	topic := []byte(o.PubTopic(i))
	if !perClient(o.SubTopic) {
		return matchCount(o.SubFilter(0), topic, o.Subs)
	}
	// Every subscriber has its own filter: count them one by one, shared
	// groups once each.
	n := 0
	groups := map[string]bool{}
	for j := 0; j < o.Subs; j++ {
		filter := o.SubFilter(j)
		if codec.IsShared([]byte(filter)) {
			if groups[filter] {
				continue
			}
			if matchCount(filter, topic, 1) > 0 {
				groups[filter] = true
				n++
			}
			continue
		}
		n += matchCount(filter, topic, 1)
	}
	return n
}

// matchCount is subs if filter matches topic (1 for a shared filter), else 0.
func matchCount(filter string, topic []byte, subs int) int {
	_, f, shared, err := codec.ParseShared([]byte(filter))
	if err != nil || !codec.Match(f, topic) {
		return 0
	}
	if shared {
		return 1
	}
	return subs
}
