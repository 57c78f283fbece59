package web

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// fill puts n samples a second apart in s's ring, msgsIn growing by 10 and
// connected by 1 a second, as take would.
func fill(s *sampler, t0 time.Time, n int) {
	for i := range n {
		s.ring[s.next] = sample{t: t0.Add(time.Duration(i) * time.Second), connected: int64(i), msgsIn: int64(10 * i)}
		s.next = (s.next + 1) % len(s.ring)
		s.n = min(s.n+1, len(s.ring))
	}
}

// TestSamplerHistory: the ring keeps the newest samples, wrapping, and the
// history is read in steps of several samples, newest last.
func TestSamplerHistory(t *testing.T) {
	if want := 3601; historySamples != want {
		t.Fatalf("historySamples = %d, want %d: an hour at one a second, ends included", historySamples, want)
	}
	s := &sampler{ring: make([]sample, 10)}
	t0 := time.Unix(1_800_000_000, 0)
	fill(s, t0, 25) // wraps twice: holds seconds 15 to 24
	if got := s.history(100, 1); len(got) != 9 {
		t.Fatalf("%d points at step 1 from 10 samples, want 9", len(got))
	}
	got := s.history(3, 3)
	if len(got) != 3 {
		t.Fatalf("%d points at step 3, want 3", len(got))
	}
	for i, p := range got {
		end := t0.Add(time.Duration(24-3*(2-i)) * time.Second)
		if p.T != end.UnixMilli() || p.Connected != int64(24-3*(2-i)) || p.MsgsInRate != 10 {
			t.Errorf("point %d = %+v, want the sample of %v with 10 messages/s", i, p, end)
		}
	}
	if got := s.history(5, 3); len(got) != 3 {
		t.Errorf("%d points asked past the ring, want the 3 it holds", len(got))
	}
	cur := sample{t: t0.Add(26 * time.Second), msgsIn: 260}
	if r := s.rates(cur, 5*time.Second); r.MessagesIn != 10 || r.Window != 5 {
		t.Errorf("rates %+v, want 10/s over 5 s", r)
	}
}

// feed adds a sample a second from t0 for secs seconds: msgsIn growing by
// 10 a second, connected 5 but 50 at second spike.
func feed(s *sampler, t0 time.Time, secs, spike int) {
	for i := range secs {
		c := int64(5)
		if i == spike {
			c = 50
		}
		s.add(sample{t: t0.Add(time.Duration(i) * time.Second), connected: c, msgsIn: int64(10 * i), bytesOut: int64(100 * i)})
	}
}

// TestSamplerMinutes: each minute closes one point, its rates averaged
// over the minute and connected its highest; points of several minutes
// average the rates and keep the highest connected; a day is kept.
func TestSamplerMinutes(t *testing.T) {
	s := &sampler{ring: make([]sample, 10)}
	t0 := time.Unix(1_800_000_000, 0).Truncate(time.Minute)
	feed(s, t0, 3*60+1, 70) // three whole minutes; the spike in the second
	if len(s.minutes) != 3 {
		t.Fatalf("%d minute points, want 3", len(s.minutes))
	}
	for i, p := range s.minutes {
		wantC := int64(5)
		if i == 1 {
			wantC = 50
		}
		if p.T != t0.Add(time.Duration(i+1)*time.Minute).UnixMilli() || p.MsgsInRate != 10 || p.BytesOutRate != 100 || p.Connected != wantC {
			t.Errorf("minute %d = %+v, want its end, 10 messages/s, 100 B/s, connected %d", i, p, wantC)
		}
	}
	got := s.minuteHistory(10, 2)
	if len(got) != 1 || got[0].T != s.minutes[2].T || got[0].MsgsInRate != 10 || got[0].Connected != 50 {
		t.Errorf("two-minute points %+v, want one ending with the last minute, 10/s, connected 50", got)
	}
	// A day and a bit: only the last day's minutes stay.
	s = &sampler{ring: make([]sample, 10)}
	for i := range minutePoints + 30 {
		s.add(sample{t: t0.Add(time.Duration(i) * time.Minute)})
	}
	if len(s.minutes) != minutePoints || s.minutes[0].T < t0.Add(30*time.Minute).UnixMilli() {
		t.Errorf("%d points from %v, want a day's %d", len(s.minutes), time.UnixMilli(s.minutes[0].T), minutePoints)
	}
}

// TestSamplerHistoryFile: the minutes go to the file atomically and come
// back in a new sampler, without those older than a day.
func TestSamplerHistoryFile(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "web", "history.json")
	s := &sampler{ring: make([]sample, 10), file: file}
	t0 := time.Now().Add(-24*time.Hour - 2*time.Minute).Truncate(time.Minute)
	s.add(sample{t: t0})
	s.add(sample{t: t0.Add(time.Minute)}) // a day and a minute old
	feed(s, time.Now().Add(-5*time.Minute).Truncate(time.Minute), 3*60+1, 70)
	if err := s.save(); err != nil {
		t.Fatal(err)
	}
	if err := s.save(); err != nil { // over the last
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(filepath.Dir(file)); len(ents) != 1 {
		t.Errorf("the history directory holds %d files, want history.json alone", len(ents))
	}
	again := &sampler{ring: make([]sample, 10), file: file}
	if err := again.load(time.Now()); err != nil {
		t.Fatal(err)
	}
	if want := s.minutes[1:]; !slices.Equal(again.minutes, want) {
		t.Errorf("loaded %+v\nwant the saved minutes but the day-old one: %+v", again.minutes, want)
	}
	if err := (&sampler{file: filepath.Join(dir, "none.json")}).load(time.Now()); err != nil {
		t.Errorf("no file: %v, want an empty history", err)
	}
	if err := os.WriteFile(file, []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := (&sampler{file: file}).load(time.Now()); err == nil {
		t.Error("a broken file loads without an error")
	}
}

// TestOverviewDayAfterRestart: a server's minutes outlive it in
// HistoryFile; the next one serves them at step=60.
func TestOverviewDayAfterRestart(t *testing.T) {
	file := filepath.Join(t.TempDir(), "web", "history.json")
	s := newTestServer(t, &fakeBroker{}, func(o *Options) { o.HistoryFile = file })
	s.sampler.stop() // no sample of now among the fed ones
	feed(s.sampler, time.Now().Add(-10*time.Minute).Truncate(time.Minute), 3*60+1, 70)
	s.Close()
	s = newTestServer(t, &fakeBroker{}, func(o *Options) { o.HistoryFile = file })
	r := call(t, s.Handler(), req{path: "/api/v1/overview?history=1440&step=60", basic: admin})
	if r.status != 400 {
		t.Errorf("history=1440: %d, want 400 past the %d points", r.status, maxHistory)
	}
	r = call(t, s.Handler(), req{path: "/api/v1/overview?history=720&step=120", basic: admin})
	var ov struct {
		History []point
		Span    int `json:"history_seconds"`
	}
	if err := json.Unmarshal(r.body, &ov); err != nil {
		t.Fatalf("%d %s: %v", r.status, r.body, err)
	}
	if len(ov.History) != 1 || ov.History[0].MsgsInRate != 10 || ov.History[0].Connected != 50 || ov.Span != 86400 {
		t.Errorf("a day at two minutes a point after the restart: %+v over %d s, want one point of 10/s, connected 50", ov.History, ov.Span)
	}
	r = call(t, s.Handler(), req{path: "/api/v1/overview?history=60&step=60", basic: admin})
	if err := json.Unmarshal(r.body, &ov); err != nil || len(ov.History) != 0 || ov.Span != 3600 {
		t.Errorf("an hour at a minute a point comes from the seconds: %d points over %d s (%v)", len(ov.History), ov.Span, err)
	}
}
