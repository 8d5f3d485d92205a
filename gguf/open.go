package gguf

import (
	"fmt"

	"github.com/kernelrt/kernelrt/arena"
)

// Open maps the file at path read-only and parses it; tensor data stays in the mapping (pages are
// read on first touch). Close the File to unmap it.
func Open(path string) (*File, error) {
	return OpenWith(path, arena.FileOptions{})
}

// OpenWith is Open with mapping options, e.g. WillNeed to start reading weights ahead.
func OpenWith(path string, opts arena.FileOptions) (*File, error) {
	return OpenLimited(path, opts, Limits{})
}

// OpenLimited is OpenWith with parsing limits (see ParseLimited).
func OpenLimited(path string, opts arena.FileOptions, l Limits) (*File, error) {
	m, err := arena.MapFile(path, opts)
	if err != nil {
		return nil, err
	}
	f, err := ParseLimited(m.Bytes(), l)
	if err != nil {
		m.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	f.mapping = m
	f.closer = m.Close
	return f, nil
}

// Mapping returns the file mapping of a File from Open (nil for one from Parse, or after Close),
// for arena.FileView at file offset DataOffset+TensorInfo.Offset.
func (f *File) Mapping() *arena.FileMapping {
	if f.data == nil {
		return nil
	}
	return f.mapping
}
