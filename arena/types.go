package arena

import (
	"fmt"
	"reflect"
	"sync"
)

// typeChecks caches the pointer-free verdict per element type (reflect.Type -> error or
// nil), so reflection runs once per type and Alloc stays allocation-free afterwards.
var typeChecks sync.Map

// pointerFree reports whether T may live in arena memory. Common scalar types are answered
// by a type switch on a nil *T (no reflection, no map lookup); others go through the cache.
func pointerFree[T any]() error {
	switch any((*T)(nil)).(type) {
	case *float32, *float64, *int8, *uint8, *int16, *uint16, *int32, *uint32,
		*int64, *uint64, *int, *uint, *uintptr, *bool, *complex64, *complex128:
		return nil
	}
	t := reflect.TypeFor[T]()
	if v, ok := typeChecks.Load(t); ok {
		if v == nil {
			return nil
		}
		return v.(error)
	}
	err := checkType(t)
	if err == nil {
		typeChecks.Store(t, nil)
	} else {
		typeChecks.Store(t, err)
	}
	return err
}

// checkType walks t and names the first part that holds a Go pointer.
func checkType(t reflect.Type) error {
	if where := pointerPath(t, t.String()); where != "" {
		return fmt.Errorf("arena: type %s cannot live in arena memory (the GC does not scan it): %s: %w",
			t, where, ErrHasPointers)
	}
	return nil
}

// pointerPath returns "" if t holds no Go pointers, else a description of where one is.
func pointerPath(t reflect.Type, path string) string {
	switch t.Kind() {
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.Complex64, reflect.Complex128:
		return ""
	case reflect.Array:
		return pointerPath(t.Elem(), path+"[i]")
	case reflect.Struct:
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			if w := pointerPath(f.Type, path+"."+f.Name); w != "" {
				return w
			}
		}
		return ""
	default:
		// Pointer, Slice, Map, String, Interface, Chan, Func, UnsafePointer.
		return fmt.Sprintf("%s is a %s", path, t.Kind())
	}
}

// typeName names T for error messages (error paths only: it may allocate).
func typeName[T any]() string { return reflect.TypeFor[T]().String() }
