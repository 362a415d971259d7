package runtime

import (
	"go/ast"
	"go/doc"
	"go/parser"
	"go/token"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The package doc says who each exported name is for: every exported type, function and
// group of constants or variables is named in it (a group by one of its names; the
// With… options as a family).
func TestPackageDocNamesEveryExportedName(t *testing.T) {
	fset := token.NewFileSet()
	names, err := filepath.Glob("*.go")
	require.NoError(t, err)
	var files []*ast.File
	for _, name := range names {
		if !strings.HasSuffix(name, "_test.go") {
			f, err := parser.ParseFile(fset, name, nil, parser.ParseComments)
			require.NoError(t, err)
			files = append(files, f)
		}
	}
	p, err := doc.NewFromFiles(fset, files, "github.com/clustron/zaris-go/runtime")
	require.NoError(t, err)
	named := func(name string) bool {
		return regexp.MustCompile(`\b` + regexp.QuoteMeta(name) + `\b`).MatchString(p.Doc)
	}
	anyNamed := func(specs []ast.Spec) bool {
		for _, s := range specs {
			for _, n := range s.(*ast.ValueSpec).Names {
				if n.IsExported() && named(n.Name) {
					return true
				}
			}
		}
		return false
	}
	checkValues := func(vs []*doc.Value) {
		for _, v := range vs {
			assert.True(t, anyNamed(v.Decl.Specs), "the package doc names none of %v", v.Names)
		}
	}
	checkFuncs := func(fs []*doc.Func) {
		for _, f := range fs {
			if strings.HasPrefix(f.Name, "With") && f.Name != "WithMaxAttempts" && f.Name != "WithTimeout" {
				continue // the options, named as a family
			}
			assert.True(t, named(f.Name), "the package doc does not name %s", f.Name)
		}
	}
	checkValues(p.Consts)
	checkValues(p.Vars)
	checkFuncs(p.Funcs)
	for _, typ := range p.Types {
		assert.True(t, named(typ.Name), "the package doc does not name %s", typ.Name)
		checkValues(typ.Consts)
		checkValues(typ.Vars)
		checkFuncs(typ.Funcs)
	}
	assert.Contains(t, strings.Join(strings.Fields(p.Doc), " "), "With… functions", "the package doc names the options as a family")
}

// NewConfig's doc names every environment variable the client reads (the env… constants).
func TestNewConfigDocNamesEveryEnvironmentVariable(t *testing.T) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "env.go", nil, 0)
	require.NoError(t, err)
	var vars []string
	ast.Inspect(f, func(n ast.Node) bool {
		if s, ok := n.(*ast.ValueSpec); ok && strings.HasPrefix(s.Names[0].Name, "env") && len(s.Values) == 1 {
			if lit, ok := s.Values[0].(*ast.BasicLit); ok && strings.HasPrefix(lit.Value, `"ZARIS_`) {
				vars = append(vars, strings.Trim(lit.Value, `"`))
			}
		}
		return true
	})
	require.Len(t, vars, 4, "env.go's variables")

	cf, err := parser.ParseFile(fset, "config.go", nil, parser.ParseComments)
	require.NoError(t, err)
	var docText string
	for _, d := range cf.Decls {
		if fn, ok := d.(*ast.FuncDecl); ok && fn.Name.Name == "NewConfig" {
			docText = fn.Doc.Text()
		}
	}
	for _, v := range vars {
		assert.Regexp(t, `(?m)^\s*- `+v+`\b`, docText, "NewConfig's doc does not say what %s means", v)
	}
}
