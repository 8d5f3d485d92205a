//go:build race

package orchestrator

// raceEnabled: under the race detector sync.Pool drops a quarter of what is put back (by
// design, to expose reuse bugs), so allocation counts are not meaningful.
const raceEnabled = true
