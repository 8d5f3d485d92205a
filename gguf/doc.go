// Package gguf reads and writes GGUF files (versions 2 and 3, little-endian), the container
// ggml and llama.cpp use for model weights and metadata.
//
// Parse reads a file from a byte slice — in practice a read-only mapping made by Open — and
// copies out only the metadata and tensor infos; TensorData returns sub-slices of the mapping,
// so a Q8_0 tensor can be handed to kernelrt's GEMV without conversion (its blocks are byte for
// byte ggml's). Builder writes files, streaming tensor data.
//
// Input is treated as hostile. Parse returns a *FormatError naming the problem, its file offset
// and the numbers involved, never panics, and sizes every allocation by bytes actually present
// (a count is checked against the bytes left times the smallest encoding of one item before
// anything is allocated), so memory use is at most a small multiple of the file size, and the
// metadata and tensor infos together may take at most Limits.MaxMetadataBytes
// (DefaultMaxMetadataBytes, 256 MiB, unless ParseLimited or OpenLimited says otherwise): the
// estimate is checked before each allocation, and a file over the cap gets a *FormatError
// wrapping ErrMetadataLimit. Decisions where the specification leaves room:
//
//   - Versions 2 and 3 are read (they are identical for little-endian files); version 1 and
//     big-endian files are refused with an error saying so.
//   - general.alignment must be a uint32 power of two from 1 to MaxAlignment (default 32).
//     Tensor data offsets must be multiples of it.
//   - Tensors: unique non-empty names of at most MaxTensorNameLen bytes of valid UTF-8; at most
//     MaxDims dims (zero dims is a scalar of one element, a zero dim an empty tensor); the row
//     length Dims[0] must be a whole number of blocks of the type; the element count and byte
//     size must fit in an int; the type id must be known (see GGMLType) even for types kernelrt
//     cannot compute with, so every tensor's size is validated.
//   - Tensor data may be in any order and have gaps, but ranges must not overlap (an error):
//     ggml never writes aliased tensors, and a loader should not see two weights share bytes.
//   - The file may end right after the last tensor's data; the padding ggml writes after it is
//     not required. A file without tensor data may end before the data section.
//   - Keys: unique, non-empty, at most MaxKeyLen bytes, valid UTF-8. String values are byte
//     strings and are not checked for UTF-8: vocabularies in the wild hold partial UTF-8
//     sequences, and refusing them would refuse working models.
//   - Bools must be 0 or 1. Arrays may nest (an array's elements may be arrays of differing
//     types) at most MaxArrayDepth deep.
package gguf
