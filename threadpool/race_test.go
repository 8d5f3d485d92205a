//go:build race

package threadpool

// raceEnabled scales the stress tests down: the race detector slows atomics ~10x.
const raceEnabled = true
