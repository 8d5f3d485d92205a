//go:build !race

package threadpool

// raceEnabled is false: the stress tests run at full size.
const raceEnabled = false
