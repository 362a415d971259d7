package middleware_test

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The rulebook is the Rules section of this package's doc; every rule code cited anywhere
// in the repository must be defined there, and every file a comment or document names
// must exist in the repository.

var (
	// ruleDef is a rule's definition in doc.go: a list item that starts with its code.
	ruleDef = regexp.MustCompile(`(?m)^//   - ([RB][0-9]+) `)
	// ruleRef is a rule code anywhere in a text.
	ruleRef = regexp.MustCompile(`\b[RB][0-9]+\b`)
	// fileRef is a file name or path of a kind the repository holds.
	fileRef = regexp.MustCompile(`[A-Za-z0-9_./-]*[A-Za-z0-9_-]\.(?:md|go|thrift|tmpl|golden)\b`)
)

// repoRoot is the repository's top directory, seen from this package.
const repoRoot = ".."

// rulebook returns the codes the Rules section defines.
func rulebook(t *testing.T) map[string]bool {
	t.Helper()
	doc, err := os.ReadFile("doc.go")
	require.NoError(t, err)
	i := strings.Index(string(doc), "// # Rules")
	require.GreaterOrEqual(t, i, 0, "doc.go has no Rules section")
	rules := map[string]bool{}
	for _, m := range ruleDef.FindAllStringSubmatch(string(doc[i:]), -1) {
		assert.False(t, rules[m[1]], "rule %s is defined twice", m[1])
		rules[m[1]] = true
	}
	return rules
}

// repoFiles lists the repository's files, slash-separated and relative to its root,
// leaving out hidden directories and the outputs of make demo and make bench.
func repoFiles(t *testing.T) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(repoRoot, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() && p != repoRoot && (strings.HasPrefix(name, ".") || name == "demo-out" || name == "bench-out") {
			return filepath.SkipDir
		}
		if !d.IsDir() {
			rel, err := filepath.Rel(repoRoot, p)
			if err != nil {
				return err
			}
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	require.NoError(t, err)
	return files
}

// proseOf returns the text of file that is prose: the comments of a Go file, all of a
// document, an IDL or a template; nothing of other files.
func proseOf(t *testing.T, file string) string {
	t.Helper()
	full := filepath.Join(repoRoot, filepath.FromSlash(file))
	switch ext := path.Ext(file); {
	case ext == ".go":
		f, err := parser.ParseFile(token.NewFileSet(), full, nil, parser.ParseComments)
		require.NoError(t, err, file)
		var b strings.Builder
		for _, g := range f.Comments {
			b.WriteString(g.Text())
		}
		return b.String()
	case ext == ".md", ext == ".thrift", ext == ".tmpl", path.Base(file) == "Makefile":
		data, err := os.ReadFile(full)
		require.NoError(t, err, file)
		return string(data)
	}
	return ""
}

// unresolved returns the rule codes in text that rules does not define and the file names
// in text that name no file of files (a path relative to the root or to dir, or a name
// that ends one of files' paths).
func unresolved(text, dir string, rules map[string]bool, files []string) (codes, names []string) {
	for _, c := range ruleRef.FindAllString(text, -1) {
		if !rules[c] {
			codes = append(codes, c)
		}
	}
	for _, n := range fileRef.FindAllString(text, -1) {
		clean := strings.TrimPrefix(n, "./")
		found := false
		for _, f := range files {
			if f == clean || f == path.Join(dir, clean) || strings.HasSuffix(f, "/"+clean) {
				found = true
				break
			}
		}
		if !found {
			names = append(names, n)
		}
	}
	return codes, names
}

// The check itself finds what it must: an undefined rule and a file outside the repo.
func TestUnresolved(t *testing.T) {
	rules := map[string]bool{"R1": true, "B2": true}
	files := []string{"README.md", "runtime/doc.go", "middleware/doc.go"}
	codes, names := unresolved("rules R1, B2 and R10; see NOTES.md, runtime/doc.go, doc.go and ./README.md",
		"middleware", rules, files)
	assert.Equal(t, []string{"R10"}, codes)
	assert.Equal(t, []string{"NOTES.md"}, names)
	_, names = unresolved("see ../elsewhere/GUIDE.md", "", rules, files)
	assert.Equal(t, []string{"../elsewhere/GUIDE.md"}, names)
}

// TestRulebook: the Rules section defines R1 to R9 and B1 to B6, every rule code in the
// repository's comments and documents is one of them, and every file they name exists.
func TestRulebook(t *testing.T) {
	rules := rulebook(t)
	for _, want := range []string{"R1", "R2", "R3", "R4", "R5", "R6", "R7", "R8", "R9", "B1", "B2", "B3", "B4", "B5", "B6"} {
		assert.True(t, rules[want], "the Rules section does not define %s", want)
	}
	files := repoFiles(t)
	require.Contains(t, files, "middleware/doc.go", "the walk did not reach the repository")
	for _, f := range files {
		codes, names := unresolved(proseOf(t, f), path.Dir(f), rules, files)
		assert.Empty(t, codes, "%s cites rules the Rules section of middleware/doc.go does not define", f)
		assert.Empty(t, names, "%s names files that are not in the repository", f)
	}
}
