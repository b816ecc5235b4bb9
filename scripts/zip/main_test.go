package main

import (
	"archive/zip"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"
)

func TestPack(t *testing.T) {
	t.Run("WritesOneExecutableBootstrap", func(t *testing.T) {
		dir := t.TempDir()
		bin := filepath.Join(dir, "bootstrap-built")
		content := []byte("\x7fELF not really")
		if err := os.WriteFile(bin, content, 0o700); err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(dir, "dist", "relay.zip")
		if err := pack(out, bin); err != nil {
			t.Fatal(err)
		}
		first, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		zr, err := zip.NewReader(bytes.NewReader(first), int64(len(first)))
		if err != nil {
			t.Fatal(err)
		}
		if len(zr.File) != 1 {
			t.Fatalf("%d entries, want 1", len(zr.File))
		}
		f := zr.File[0]
		if f.Name != "bootstrap" || f.Mode().Perm() != 0o755 || !f.Modified.Equal(epoch) {
			t.Fatalf("entry %s mode %v modified %v; want bootstrap, 0755, %v", f.Name, f.Mode(), f.Modified, epoch)
		}
		rc, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close()
		if got, _ := io.ReadAll(rc); !bytes.Equal(got, content) {
			t.Fatalf("content %q", got)
		}
		// The same binary gives the same archive.
		if err := pack(out, bin); err != nil {
			t.Fatal(err)
		}
		if again, _ := os.ReadFile(out); !bytes.Equal(again, first) {
			t.Fatal("packing the same binary twice gave different archives")
		}
	})
}
