package repocheck

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// maxTrackedBytes is the largest file git may track: anything larger is a
// build output, a data dump or a fetched artifact, which belong in
// .gitignore or a cache.
const maxTrackedBytes = 1 << 20

// executableMagic are the leading bytes of the executable formats a Go
// toolchain writes (ELF, Mach-O in both byte orders and widths, fat Mach-O,
// PE): a tracked file that starts with one is a binary someone built.
var executableMagic = [][]byte{
	[]byte("\x7fELF"),
	{0xfe, 0xed, 0xfa, 0xce}, {0xce, 0xfa, 0xed, 0xfe},
	{0xfe, 0xed, 0xfa, 0xcf}, {0xcf, 0xfa, 0xed, 0xfe},
	{0xca, 0xfe, 0xba, 0xbe},
	[]byte("MZ"),
}

func TestTracked(t *testing.T) {
	t.Parallel()
	// FilesAreSourceNotBinaries fails when git tracks an executable
	// binary or a file over maxTrackedBytes.
	t.Run("FilesAreSourceNotBinaries", func(t *testing.T) {
		t.Parallel()
		root := filepath.Join("..", "..")
		files := trackedFiles(t, root)
		// Positive control: the listing is this repository's.
		if !slices.Contains(files, "go.mod") || !slices.Contains(files, "internal/repocheck/doc.go") {
			t.Fatalf("git ls-files does not list this repository: %d files", len(files))
		}
		for _, name := range files {
			if problem := checkTracked(filepath.Join(root, name)); problem != "" {
				t.Errorf("%s: %s", name, problem)
			}
		}
	})

	// CheckTrackedCatchesBinariesAndLargeFiles keeps the check itself honest
	// on files it makes.
	t.Run("CheckTrackedCatchesBinariesAndLargeFiles", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		for _, c := range []struct {
			name    string
			content []byte
			bad     bool
		}{
			{"elf", append([]byte("\x7fELF\x02\x01\x01"), make([]byte, 64)...), true},
			{"macho", append([]byte{0xcf, 0xfa, 0xed, 0xfe}, make([]byte, 64)...), true},
			{"large.json", bytes.Repeat([]byte("a"), maxTrackedBytes+1), true},
			{"script.sh", []byte("#!/usr/bin/env bash\necho hi\n"), false},
			{"limit.txt", bytes.Repeat([]byte("a"), maxTrackedBytes), false},
		} {
			path := filepath.Join(dir, c.name)
			if err := os.WriteFile(path, c.content, 0o755); err != nil {
				t.Fatal(err)
			}
			if got := checkTracked(path) != ""; got != c.bad {
				t.Errorf("%s: flagged %v, want %v", c.name, got, c.bad)
			}
		}
	})
}

// checkTracked says what is wrong with tracking path, or "" when nothing is.
func checkTracked(path string) string {
	info, err := os.Lstat(path)
	if err != nil || !info.Mode().IsRegular() {
		return "" // a link or a file deleted in the work tree: nothing to read
	}
	if info.Size() > maxTrackedBytes {
		return "over 1 MB: build outputs and data dumps belong in .gitignore"
	}
	f, err := os.Open(path)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	head := make([]byte, 4)
	n, _ := f.Read(head)
	for _, magic := range executableMagic {
		if n >= len(magic) && bytes.Equal(head[:len(magic)], magic) {
			return "an executable binary: build outputs belong in .gitignore"
		}
	}
	return ""
}

// trackedFiles returns `git ls-files` at root, skipping the test outside a
// git checkout or without git.
func trackedFiles(t *testing.T, root string) []string {
	t.Helper()
	git, err := exec.LookPath("git")
	if err != nil {
		t.Skipf("git not on PATH, cannot list tracked files: %v", err)
	}
	cmd := exec.Command(git, "ls-files", "-z")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) && strings.Contains(string(ee.Stderr), "not a git repository") {
			t.Skipf("not a git checkout: %s", ee.Stderr)
		}
		t.Fatalf("git ls-files: %v", err)
	}
	return strings.Split(strings.TrimRight(string(out), "\x00"), "\x00")
}
