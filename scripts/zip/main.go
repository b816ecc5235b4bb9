// Command zip packs a Lambda function's bootstrap binary into the zip file
// the stack deploys: one entry named "bootstrap", executable, with a fixed
// timestamp so the same binary always gives the same archive (and the same
// CDK asset hash).
//
//	go run ./scripts/zip -o dist/relay.zip dist/relay/bootstrap
package main

import (
	"archive/zip"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"
)

func main() {
	out := flag.String("o", "", "the zip file to write (required)")
	flag.Parse()
	if *out == "" || flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: zip -o out.zip path/to/bootstrap")
		os.Exit(2)
	}
	if err := pack(*out, flag.Arg(0)); err != nil {
		fmt.Fprintln(os.Stderr, "zip:", err)
		os.Exit(1)
	}
}

// epoch is the timestamp of every entry: the zip format's earliest date.
var epoch = time.Date(1980, 1, 1, 0, 0, 0, 0, time.UTC)

func pack(out, bootstrap string) (err error) {
	src, err := os.Open(bootstrap)
	if err != nil {
		return err
	}
	defer src.Close()
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(out), ".zip-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	zw := zip.NewWriter(tmp)
	hdr := &zip.FileHeader{Name: "bootstrap", Method: zip.Deflate, Modified: epoch}
	// Lambda runs the entry as the runtime: it must be executable.
	hdr.SetMode(0o755)
	w, err := zw.CreateHeader(hdr)
	if err != nil {
		return err
	}
	if _, err := io.Copy(w, src); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	// CreateTemp makes the file private; the archive is a build output.
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), out)
}
