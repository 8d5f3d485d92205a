// Package tokenizer turns text into token ids and back for GGUF models, reading the
// vocabulary from a file's tokenizer.ggml.* metadata and producing the ids llama.cpp
// produces for the same file.
//
// Two vocabulary types are implemented: byte-level BPE (tokenizer.ggml.model "gpt2": GPT-2,
// Llama 3, Qwen2/2.5/3) with the pre-tokenizers llama.cpp calls qwen2, llama-bpe, gpt-2 and
// default (and their aliases), and SentencePiece BPE with byte fallback ("llama": Llama 2,
// TinyLlama, Mistral 7B). Any other model or pre-tokenizer name is an error at load time.
//
// Behaviour follows llama.cpp (src/llama-vocab.cpp, src/unicode.cpp) where it is defined:
//
//   - Special tokens: control, user-defined and unknown tokens are split out of the text
//     longest first (tokenizer_st_partition); control and unknown ones only with
//     EncodeOptions.ParseSpecial, user-defined ones always.
//   - BOS/EOS are added with EncodeOptions.AddSpecial when tokenizer.ggml.add_bos_token /
//     add_eos_token say so, defaulting as llama.cpp does (SPM and llama-bpe add BOS).
//   - The end-of-generation set holds EOS, EOT, EOM, the FIM pad/repo/separator tokens and
//     the tokens llama.cpp recognises by text (<|im_end|>, <|eot_id|>, <|endoftext|>, ...).
//   - Invalid UTF-8 is not an error by default: for BPE each byte that starts no
//     well-formed sequence reads as U+FFFD (llama.cpp's unicode_cpts_from_utf8), for SPM the
//     bytes go through byte fallback. EncodeOptions.RejectInvalidUTF8 makes it an error.
//     Deviation: a 4-byte sequence above U+10FFFF, on which llama.cpp aborts, also reads
//     as U+FFFD.
//   - Decoding: Piece gives a token's bytes, DecodeWith is llama_detokenize, and a
//     StreamDecoder emits text as tokens arrive, holding back a UTF-8 character split across
//     tokens until it is complete.
//
// Not implemented: the lstrip/rstrip token attributes llama.cpp sets by model name (phi-3,
// jina-v2, modern-bert), and the WPM, UGM, RWKV and PLaMo-2 vocabulary types.
package tokenizer
