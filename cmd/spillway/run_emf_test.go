package main

import (
	"os"
	"path/filepath"
	"testing"
)

func TestRunEMF(t *testing.T) {
	// Two runs started together must not count each other's EMF lines.
	t.Run("FileDefaultsToAFileOfItsOwn", func(t *testing.T) {
		t.Setenv("TMPDIR", t.TempDir())
		var a, b string
		fa, err := createEMFFile(&a)
		if err != nil {
			t.Fatal(err)
		}
		defer fa.Close()
		fb, err := createEMFFile(&b)
		if err != nil {
			t.Fatal(err)
		}
		defer fb.Close()
		if a == "" || a == b {
			t.Fatalf("default EMF files %q and %q: want two distinct files", a, b)
		}
		named := filepath.Join(t.TempDir(), "emf.jsonl")
		fn, err := createEMFFile(&named)
		if err != nil {
			t.Fatal(err)
		}
		fn.Close()
		if _, err := os.Stat(named); err != nil || named != filepath.Join(filepath.Dir(named), "emf.jsonl") {
			t.Fatalf("named EMF file: %q, %v", named, err)
		}
	})
}
