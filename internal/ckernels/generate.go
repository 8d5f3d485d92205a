package ckernels

//go:generate go run ./gen
