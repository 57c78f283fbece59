//go:build race

package codec_test

// raceEnabled is set under the race detector, whose sync.Pool drops a
// quarter of what is put back: allocation counts of pooled paths mean
// nothing then.
const raceEnabled = true
