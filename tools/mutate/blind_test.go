package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A mutant in a case's condition, in a constant or after a function literal in its
// statement is one gremlins cannot see; one in a statement is not, covered or not.
func TestBlindSpotFindsWhatCoverageHasNoBlockFor(t *testing.T) {
	src, err := os.ReadFile("testdata/sw/sw.go")
	require.NoError(t, err)
	for _, c := range []struct {
		line, col int
		want      string
	}{
		{5, 15, blindDecl},
		{10, 9, blindCase},
		{12, 9, blindCase},
		{21, 8, blindCase},
		{24, 11, ""},
		{29, 45, blindFuncLit},
		{29, 20, ""}, // the literal's own body is a block
	} {
		got, err := blindSpot(src, c.line, c.col)
		require.NoError(t, err)
		assert.Equal(t, c.want, got, "sw.go:%d:%d", c.line, c.col)
	}
	_, err = blindSpot(src, 99, 1)
	assert.ErrorContains(t, err, "line 99 is outside the file's")
}

// applyMutant swaps the operator gremlins names, the longest that matches, and refuses a
// position that holds no operator of the mutant's type.
func TestApplyMutantSwapsGremlinsOperator(t *testing.T) {
	src := []byte("package p\n\nvar x = a >= b - c\n")
	for _, c := range []struct {
		col  int
		typ  string
		want string
	}{
		{11, "CONDITIONALS_BOUNDARY", "var x = a > b - c"},
		{11, "CONDITIONALS_NEGATION", "var x = a < b - c"},
		{16, "ARITHMETIC_BASE", "var x = a >= b + c"},
		{16, "INVERT_NEGATIVES", "var x = a >= b + c"},
	} {
		got, err := applyMutant(src, 3, c.col, c.typ)
		require.NoError(t, err)
		assert.Equal(t, "package p\n\n"+c.want+"\n", string(got), "%s at 3:%d", c.typ, c.col)
	}
	_, err := applyMutant(src, 3, 9, "CONDITIONALS_BOUNDARY")
	assert.ErrorContains(t, err, `no operator CONDITIONALS_BOUNDARY swaps at 3:9 (found "a ")`)
	_, err = applyMutant(src, 3, 11, "INVERT_LOOPCTRL")
	assert.ErrorContains(t, err, "mutant type INVERT_LOOPCTRL is not one this tool can apply")
	_, err = applyMutant(src, 7, 1, "ARITHMETIC_BASE")
	assert.ErrorContains(t, err, "line 7 is past the end of the file")
}

// With -module, the mutants gremlins reported NOT COVERED only because it cannot see them
// are run: the fixture's tests kill the constant's, Size's and Fails's, Odd's case lives
// (no test calls Odd), and Odd's return stays not covered. Without it, all ten survive.
func TestRunRunsTheMutantsGremlinsCannotSee(t *testing.T) {
	root, err := filepath.Abs("testdata/sw")
	require.NoError(t, err)
	var out strings.Builder
	err = run(&out, "", 0, blindOptions{Root: root, Workers: 2, Coefficient: 3}, []string{".=testdata/sw.log"})
	require.NoError(t, err, out.String())
	text := out.String()
	for _, line := range []string{
		"      KILLED ARITHMETIC_BASE at sw.go:5:15 (gremlins cannot see a declaration outside any function)",
		"      KILLED CONDITIONALS_NEGATION at sw.go:10:9 (gremlins cannot see a case's condition)",
		"      KILLED CONDITIONALS_BOUNDARY at sw.go:10:9 (gremlins cannot see a case's condition)",
		"      KILLED CONDITIONALS_NEGATION at sw.go:12:9 (gremlins cannot see a case's condition)",
		"      KILLED CONDITIONALS_BOUNDARY at sw.go:12:9 (gremlins cannot see a case's condition)",
		"      KILLED CONDITIONALS_NEGATION at sw.go:29:45 (gremlins cannot see the rest of a statement after a function literal)",
		"       LIVED ARITHMETIC_BASE at sw.go:21:8 (gremlins cannot see a case's condition)",
		"       LIVED CONDITIONALS_NEGATION at sw.go:21:11 (gremlins cannot see a case's condition)",
		"total         60.0%  killed 6 of 10 non-equivalent mutants, 2 of them in code no test runs",
		"survived: sw.go:24:11 CONDITIONALS_NEGATION (not covered)",
		"survived: sw.go:21:8 ARITHMETIC_BASE (lived)",
	} {
		assert.Contains(t, text, line)
	}
	src, err := os.ReadFile("testdata/sw/sw.go")
	require.NoError(t, err)
	assert.Contains(t, string(src), "const Big = 5 * 2", "the module itself is never mutated")

	out.Reset()
	require.NoError(t, run(&out, "", 0, blindOptions{}, []string{".=testdata/sw.log"}))
	assert.Contains(t, out.String(), "total          0.0%  killed 0 of 10 non-equivalent mutants, 10 of them in code no test runs")
}
