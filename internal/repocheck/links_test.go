package repocheck

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// repoRoot is the repository root, seen from this package's directory.
const repoRoot = "../.."

// markdownLink matches an inline link or image target: [text](target).
var markdownLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// markdownFiles returns every Markdown file of the repository outside
// node_modules and hidden directories, relative to repoRoot.
func markdownFiles(t *testing.T) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(repoRoot, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() && path != repoRoot && (name == "node_modules" || strings.HasPrefix(name, ".") || name == "cdk.out") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(name, ".md") {
			rel, err := filepath.Rel(repoRoot, path)
			if err != nil {
				return err
			}
			files = append(files, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// fencedCode matches a fenced code block, whose brackets are not links.
var fencedCode = regexp.MustCompile("(?s)```.*?```")

// headingSlug is GitHub's anchor for a heading: lower case, punctuation
// other than hyphens dropped, spaces turned into hyphens.
func headingSlug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// anchors returns the heading anchors of a Markdown file, numbered as
// GitHub numbers repeated headings (name, name-1, ...).
func anchors(text string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	for _, line := range strings.Split(fencedCode.ReplaceAllString(text, ""), "\n") {
		trimmed := strings.TrimLeft(line, "#")
		if len(trimmed) == len(line) || !strings.HasPrefix(trimmed, " ") {
			continue
		}
		slug := headingSlug(trimmed)
		if n := seen[slug]; n > 0 {
			out[slug+"-"+strconv.Itoa(n)] = true
		} else {
			out[slug] = true
		}
		seen[slug]++
	}
	return out
}

func TestLinks(t *testing.T) {
	// Every relative link of every Markdown file names a file that exists and,
	// with a #fragment, a heading of that file: sections move between files
	// (infra/README.md once sent readers to README sections that had moved to
	// docs/operations.md), and a link left behind must fail here.
	t.Run("RelativeLinksAndAnchorsResolve", func(t *testing.T) {
		files := markdownFiles(t)
		if len(files) < 5 {
			t.Fatalf("found only %v: is repoRoot right?", files)
		}
		texts := map[string]string{}
		read := func(rel string) (string, bool) {
			if s, ok := texts[rel]; ok {
				return s, true
			}
			raw, err := os.ReadFile(filepath.Join(repoRoot, rel))
			if err != nil {
				return "", false
			}
			texts[rel] = string(raw)
			return texts[rel], true
		}
		checked := 0
		for _, file := range files {
			text, _ := read(file)
			for _, m := range markdownLink.FindAllStringSubmatch(fencedCode.ReplaceAllString(text, ""), -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				path, fragment, _ := strings.Cut(target, "#")
				dest := file
				if path != "" {
					dest = filepath.Clean(filepath.Join(filepath.Dir(file), path))
					if _, err := os.Stat(filepath.Join(repoRoot, dest)); err != nil {
						t.Errorf("%s: link %s: %s does not exist", file, target, dest)
						continue
					}
				}
				checked++
				if fragment == "" || !strings.HasSuffix(dest, ".md") {
					continue
				}
				destText, _ := read(dest)
				if !anchors(destText)[fragment] {
					t.Errorf("%s: link %s: %s has no heading with anchor #%s", file, target, dest, fragment)
				}
			}
		}
		if checked == 0 {
			t.Fatal("no relative links found")
		}
	})

	t.Run("HeadingSlugsAreGitHubs", func(t *testing.T) {
		for heading, want := range map[string]string{
			" Changing the bucket count":      "changing-the-bucket-count",
			" Relay (`functions/relay`)":      "relay-functionsrelay",
			" 4. Latency":                     "4-latency",
			" Steady traffic on Lambda":       "steady-traffic-on-lambda",
			" Streams → Lambda, and when not": "streams--lambda-and-when-not",
		} {
			if got := headingSlug(heading); got != want {
				t.Errorf("headingSlug(%q) = %q, want %q", heading, got, want)
			}
		}
		got := anchors("# A\n## A\n```\n# not a heading\n```\n### A\n#hashtag\n")
		for _, want := range []string{"a", "a-1", "a-2"} {
			if !got[want] {
				t.Errorf("anchors lack %q: %v", want, got)
			}
		}
		if got["hashtag"] || got["not-a-heading"] {
			t.Errorf("anchors took a non-heading: %v", got)
		}
	})
}
