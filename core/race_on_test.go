//go:build race

package core

// raceEnabled is set under the race detector, which makes the large cost
// tests ten times slower: they use fewer items then.
const raceEnabled = true
