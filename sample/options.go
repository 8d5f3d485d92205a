package sample

import (
	"fmt"
	"math"
)

// Options configures a Sampler. The zero value is greedy decoding with no penalties: every
// filter is off at its zero value, so a caller sets only what it wants. DefaultOptions gives
// llama.cpp's defaults instead.
type Options struct {
	// Temperature divides the logits before the random draw; <= 0 picks the most likely
	// token (greedy), after bias and penalties. NaN and infinities are errors.
	Temperature float32
	// TopK keeps the K most likely tokens; 0 keeps all. Negative is an error.
	TopK int
	// TopP keeps the smallest set of most likely tokens whose probability (softmax at
	// temperature 1 over what top-k kept) reaches TopP; 0 and 1 keep all. Outside [0, 1] is
	// an error.
	TopP float32
	// MinP keeps the tokens whose probability is at least MinP times the most likely one's;
	// 0 keeps all. Outside [0, 1] is an error.
	MinP float32

	// RepeatPenalty divides the positive logits and multiplies the negative ones of every
	// token seen in the last PenaltyLastN tokens (llama.cpp's repeat_penalty); 0 and 1 are
	// off. Negative is an error.
	RepeatPenalty float32
	// FrequencyPenalty is subtracted from a seen token's logit once per occurrence.
	FrequencyPenalty float32
	// PresencePenalty is subtracted once from the logit of every seen token.
	PresencePenalty float32
	// PenaltyLastN is how many of the most recently accepted tokens the penalties look at;
	// 0 turns the penalties off. Negative is an error.
	PenaltyLastN int

	// LogitBias is added to the logits of the given tokens before anything else;
	// -Inf bans a token. NaN, +Inf and ids outside the vocabulary are errors.
	LogitBias map[int32]float32

	// Seed starts the random draw: the same Seed, logits and history give the same tokens on
	// every platform (see rng).
	Seed uint64
}

// DefaultOptions are llama.cpp's sampling defaults (temperature 0.8, top-k 40, top-p 0.95,
// min-p 0.05, penalties off over the last 64 tokens).
func DefaultOptions() Options {
	return Options{Temperature: 0.8, TopK: 40, TopP: 0.95, MinP: 0.05, RepeatPenalty: 1, PenaltyLastN: 64}
}

// Greedy reports whether the options pick the most likely token without a random draw.
func (o *Options) Greedy() bool { return o.Temperature <= 0 }

// Validate reports the first option that cannot work, naming it; vocab bounds the token ids
// of LogitBias (vocab <= 0 skips that check).
func (o *Options) Validate(vocab int) error {
	finite := func(name string, v float32) error {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return fmt.Errorf("sample: %s must be a finite number, got %v", name, v)
		}
		return nil
	}
	unit := func(name string, v float32) error {
		if err := finite(name, v); err != nil {
			return err
		}
		if v < 0 || v > 1 {
			return fmt.Errorf("sample: %s must be in [0, 1] (0 turns it off), got %v", name, v)
		}
		return nil
	}
	if err := finite("Temperature", o.Temperature); err != nil {
		return err
	}
	if o.TopK < 0 {
		return fmt.Errorf("sample: TopK must be >= 0 (0 keeps every token), got %d", o.TopK)
	}
	if err := unit("TopP", o.TopP); err != nil {
		return err
	}
	if err := unit("MinP", o.MinP); err != nil {
		return err
	}
	if err := finite("RepeatPenalty", o.RepeatPenalty); err != nil {
		return err
	}
	if o.RepeatPenalty < 0 {
		return fmt.Errorf("sample: RepeatPenalty must be >= 0 (0 and 1 turn it off), got %v", o.RepeatPenalty)
	}
	if err := finite("FrequencyPenalty", o.FrequencyPenalty); err != nil {
		return err
	}
	if err := finite("PresencePenalty", o.PresencePenalty); err != nil {
		return err
	}
	if o.PenaltyLastN < 0 {
		return fmt.Errorf("sample: PenaltyLastN must be >= 0 (0 turns the penalties off), got %d", o.PenaltyLastN)
	}
	for id, b := range o.LogitBias {
		if id < 0 || (vocab > 0 && int(id) >= vocab) {
			return fmt.Errorf("sample: LogitBias token %d is outside the vocabulary (0..%d)", id, vocab-1)
		}
		if math.IsNaN(float64(b)) || math.IsInf(float64(b), 1) {
			return fmt.Errorf("sample: LogitBias of token %d must be finite or -Inf, got %v", id, b)
		}
	}
	return nil
}

// penalties reports whether any penalty changes logits.
func (o *Options) penalties() bool {
	rep := o.RepeatPenalty != 0 && o.RepeatPenalty != 1
	return o.PenaltyLastN > 0 && (rep || o.FrequencyPenalty != 0 || o.PresencePenalty != 0)
}
