package main

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Gremlins decides whether a test can reach a mutant from Go's coverage profile, and Go's
// coverage has no block for a switch case's condition nor for a declaration outside any
// function (go-gremlins/gremlins#298). Gremlins reports those mutants NOT COVERED whatever
// the tests do, and never runs them. This file finds them and runs them the way gremlins
// runs the others: the operator swapped in a copy of the module, the package's tests run
// against it.

// Why gremlins cannot see a mutant.
const (
	blindDecl    = "a declaration outside any function"
	blindCase    = "a case's condition"
	blindFuncLit = "the rest of a statement after a function literal"
)

// blindSpot returns why gremlins cannot see the mutant at line:col of the Go source src
// (blindDecl, blindCase or blindFuncLit), or "" when the mutant is in code Go's coverage
// does track. It follows cmd/cover: a block runs from a statement of a list (a block's, a
// case's) to the statement's boundary, which is the opening brace of its body for a
// control statement, the opening brace of the first function literal in it, or its end.
func blindSpot(src []byte, line, col int) (string, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "", src, parser.SkipObjectResolution)
	if err != nil {
		return "", err
	}
	tf := fset.File(f.Pos())
	if line < 1 || line > tf.LineCount() {
		return "", fmt.Errorf("line %d is outside the file's %d lines", line, tf.LineCount())
	}
	pos := tf.LineStart(line) + token.Pos(col-1)
	within := func(n ast.Node) bool { return n != nil && n.Pos() <= pos && pos < n.End() }
	inFunc, inCase, inBlock := false, false, false
	list := func(stmts []ast.Stmt) {
		for _, s := range stmts {
			switch s.(type) {
			case *ast.CaseClause, *ast.CommClause: // a switch's or select's body: no block
			default:
				inBlock = inBlock || s.Pos() <= pos && pos < boundary(s)
			}
		}
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.FuncDecl:
			inFunc = inFunc || within(n.Body)
		case *ast.FuncLit:
			inFunc = inFunc || within(n.Body)
		case *ast.BlockStmt:
			list(n.List)
		case *ast.CaseClause:
			list(n.Body)
			for _, e := range n.List {
				inCase = inCase || within(e)
			}
		case *ast.CommClause:
			list(n.Body)
			inCase = inCase || within(n.Comm)
		case *ast.IfStmt:
			if elif, ok := n.Else.(*ast.IfStmt); ok { // cover gives "else if" a block of its own
				list([]ast.Stmt{elif})
			}
		}
		return true
	})
	switch {
	case !inFunc:
		return blindDecl, nil
	case inBlock:
		return "", nil
	case inCase:
		return blindCase, nil
	}
	return blindFuncLit, nil
}

// boundary is where cover ends the block a statement s starts or goes on.
func boundary(s ast.Stmt) token.Pos {
	first := func(nodes ...ast.Node) token.Pos {
		for _, n := range nodes {
			if p := funcLit(n); p.IsValid() {
				return p
			}
		}
		return token.NoPos
	}
	var p token.Pos
	switch s := s.(type) {
	case *ast.BlockStmt:
		return s.Lbrace
	case *ast.LabeledStmt:
		return boundary(s.Stmt)
	case *ast.IfStmt:
		p = cmp.Or(first(s.Init, s.Cond), s.Body.Lbrace)
	case *ast.ForStmt:
		p = cmp.Or(first(s.Init, s.Cond, s.Post), s.Body.Lbrace)
	case *ast.RangeStmt:
		p = cmp.Or(first(s.X), s.Body.Lbrace)
	case *ast.SwitchStmt:
		p = cmp.Or(first(s.Init, s.Tag), s.Body.Lbrace)
	case *ast.TypeSwitchStmt:
		p = cmp.Or(first(s.Init), s.Body.Lbrace)
	case *ast.SelectStmt:
		p = s.Body.Lbrace
	default:
		p = cmp.Or(first(s), s.End())
	}
	return p
}

// funcLit returns the opening brace of the body of the first function literal in n, or
// token.NoPos.
func funcLit(n ast.Node) token.Pos {
	var p token.Pos
	if n == nil {
		return p
	}
	ast.Inspect(n, func(n ast.Node) bool {
		if fl, ok := n.(*ast.FuncLit); ok && !p.IsValid() {
			p = fl.Body.Lbrace
		}
		return !p.IsValid()
	})
	return p
}

// swaps is gremlins' operator table (v0.5.0) for the mutant types it enables by default:
// for each type, the operator a mutant replaces and the one it puts in its place.
var swaps = map[string]map[string]string{
	"ARITHMETIC_BASE":       {"+": "-", "*": "/", "/": "*", "%": "*", "-": "+"},
	"CONDITIONALS_BOUNDARY": {">=": ">", ">": ">=", "<=": "<", "<": "<="},
	"CONDITIONALS_NEGATION": {"==": "!=", ">=": "<", ">": "<=", "<=": ">", "<": ">=", "!=": "=="},
	"INCREMENT_DECREMENT":   {"--": "++", "++": "--"},
	"INVERT_NEGATIVES":      {"-": "+"},
}

// applyMutant returns src with the operator at line:col swapped as mutant type typ does.
// It fails when the operator there is not one typ swaps (the log is not of this source).
func applyMutant(src []byte, line, col int, typ string) ([]byte, error) {
	table, ok := swaps[typ]
	if !ok {
		return nil, fmt.Errorf("mutant type %s is not one this tool can apply", typ)
	}
	off := 0
	for n := 1; n < line; n++ {
		i := bytes.IndexByte(src[off:], '\n')
		if i < 0 {
			return nil, fmt.Errorf("line %d is past the end of the file", line)
		}
		off += i + 1
	}
	off += col - 1
	if col < 1 || off >= len(src) {
		return nil, fmt.Errorf("column %d is outside line %d", col, line)
	}
	from := ""
	for op := range table { // the longest operator that matches: ">=" before ">"
		if bytes.HasPrefix(src[off:], []byte(op)) && len(op) > len(from) {
			from = op
		}
	}
	if from == "" {
		return nil, fmt.Errorf("no operator %s swaps at %d:%d (found %q)", typ, line, col, src[off:min(off+2, len(src))])
	}
	out := append(append(append([]byte{}, src[:off]...), table[from]...), src[off+len(from):]...)
	return out, nil
}

// blindRun runs, in copies of the module at root, the mutants of ms that gremlins reported
// NOT COVERED only because it cannot see them, and returns ms with their outcomes: KILLED
// when the package's tests fail, TIMED OUT when they run past coefficient times their plain
// run, LIVED when they pass, NOT VIABLE when the mutant does not build. Each line it writes
// to w names one mutant it ran, in gremlins' format, with why gremlins could not.
func blindRun(ctx context.Context, w io.Writer, root string, ms []mutant, workers int, coefficient float64) ([]mutant, error) {
	type job struct {
		i      int
		reason string
	}
	var jobs []job
	for i, m := range ms {
		if m.Status != "NOT COVERED" {
			continue
		}
		file, line, col, err := m.position()
		if err != nil {
			return nil, err
		}
		src, err := os.ReadFile(filepath.Join(root, file))
		if err != nil {
			return nil, err
		}
		reason, err := blindSpot(src, line, col)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", m.Pos, err)
		}
		if reason != "" {
			jobs = append(jobs, job{i, reason})
		}
	}
	out := append([]mutant(nil), ms...)
	if len(jobs) == 0 {
		return out, nil
	}
	workers = max(1, min(workers, len(jobs)))
	copies := make([]string, workers)
	for i := range copies {
		dir, err := os.MkdirTemp("", "mutate-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
		if err := copyModule(root, dir); err != nil {
			return nil, err
		}
		copies[i] = dir
	}

	// Each package's plain run: it must pass, and it sets the package's timeout.
	timeouts := map[string]time.Duration{}
	for _, j := range jobs {
		pkg := path.Dir(ms[j.i].file())
		if _, ok := timeouts[pkg]; ok {
			continue
		}
		start := time.Now()
		if res, text := goTest(ctx, copies[0], pkg, 0); res != "LIVED" {
			return nil, fmt.Errorf("the tests of ./%s do not pass without a mutant:\n%s", pkg, text)
		}
		timeouts[pkg] = max(10*time.Second, time.Duration(coefficient*float64(time.Since(start))))
	}

	next := make(chan job)
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
	)
	for _, dir := range copies {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range next {
				m := ms[j.i]
				status, err := runMutant(ctx, dir, m, timeouts[path.Dir(m.file())])
				mu.Lock()
				if err != nil {
					errs = append(errs, fmt.Errorf("%s %s: %w", m.Pos, m.Type, err))
				} else {
					out[j.i].Status = status
					fmt.Fprintf(w, "%12s %s at %s (gremlins cannot see %s)\n", status, m.Type, m.Pos, j.reason)
				}
				mu.Unlock()
			}
		}()
	}
	sort.Slice(jobs, func(a, b int) bool { return ms[jobs[a].i].Pos < ms[jobs[b].i].Pos })
	for _, j := range jobs {
		next <- j
	}
	close(next)
	wg.Wait()
	return out, errors.Join(errs...)
}

// runMutant applies m to the copy of the module at dir, runs its package's tests within
// timeout and puts the file back.
func runMutant(ctx context.Context, dir string, m mutant, timeout time.Duration) (string, error) {
	file, line, col, err := m.position()
	if err != nil {
		return "", err
	}
	name := filepath.Join(dir, file)
	src, err := os.ReadFile(name)
	if err != nil {
		return "", err
	}
	mutated, err := applyMutant(src, line, col, m.Type)
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(name, mutated, 0o644); err != nil {
		return "", err
	}
	status, _ := goTest(ctx, dir, path.Dir(file), timeout)
	return status, os.WriteFile(name, src, 0o644)
}

// goTest runs the tests of package pkg of the module at dir, within timeout when it is not
// 0, and says how they ended: LIVED (passed), KILLED (failed), TIMED OUT or NOT VIABLE (did
// not build), with the output.
func goTest(ctx context.Context, dir, pkg string, timeout time.Duration) (string, string) {
	args := []string{"test", "-count=1", "-failfast"}
	if timeout > 0 {
		args = append(args, "-timeout", timeout.String())
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout+time.Minute) // the test binary's own timeout fires first
		defer cancel()
	}
	cmd := exec.CommandContext(ctx, "go", append(args, "./"+pkg)...)
	cmd.Dir = dir
	// The copy holds the checkout's go.work; the mutants are of the module at dir alone, built
	// against its own go.mod, so the workspace stays out.
	cmd.Env = append(os.Environ(), "GOWORK=off")
	cmd.WaitDelay = 10 * time.Second
	text, err := cmd.CombinedOutput()
	switch {
	case err == nil:
		return "LIVED", string(text)
	case bytes.Contains(text, []byte("[build failed]")) || bytes.Contains(text, []byte("[setup failed]")):
		return "NOT VIABLE", string(text)
	case bytes.Contains(text, []byte("panic: test timed out")) || ctx.Err() != nil:
		return "TIMED OUT", string(text)
	}
	return "KILLED", string(text)
}

// copyModule copies the module at root into dir, with the modules nested in it (a test
// may read their files) and without hidden entries (.git).
func copyModule(root, dir string) error {
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		if rel != "." && strings.HasPrefix(d.Name(), ".") {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dir, rel), 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, rel), data, 0o644)
	})
}

// file is the mutant's file, from the repository's root.
func (m mutant) file() string {
	f, _, _, _ := m.position()
	return f
}

// position splits the mutant's file:line:column.
func (m mutant) position() (file string, line, col int, err error) {
	rest, c, ok1 := cutLast(m.Pos)
	file, l, ok2 := cutLast(rest)
	if ok1 && ok2 {
		if line, err = strconv.Atoi(l); err == nil {
			if col, err = strconv.Atoi(c); err == nil {
				return file, line, col, nil
			}
		}
	}
	return "", 0, 0, fmt.Errorf("%q is not file:line:column", m.Pos)
}

// cutLast cuts s around its last colon.
func cutLast(s string) (before, after string, ok bool) {
	i := strings.LastIndexByte(s, ':')
	if i < 0 {
		return s, "", false
	}
	return s[:i], s[i+1:], true
}
