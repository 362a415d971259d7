package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
)

// program is the part of `thrift --gen json` output that zarisgen reads.
type program struct {
	Name       string            `json:"name"`
	Namespaces map[string]string `json:"namespaces"`
	Enums      []enum            `json:"enums"`
	Structs    []structType      `json:"structs"`
	Services   []service         `json:"services"`

	// lines is the IDL's text, one entry a line, for error positions; nil when the
	// program was decoded from JSON alone.
	lines []string
	// source is the IDL path errors name.
	source string
}

type enum struct {
	Name        string            `json:"name"`
	Annotations map[string]string `json:"annotations"`
	Members     []enumMember      `json:"members"`
}

type enumMember struct {
	Name  string `json:"name"`
	Value int64  `json:"value"`
}

type structType struct {
	Name        string  `json:"name"`
	Fields      []field `json:"fields"`
	IsException bool    `json:"isException"`
	IsUnion     bool    `json:"isUnion"`
}

type field struct {
	Key      int    `json:"key"`
	Name     string `json:"name"`
	TypeID   string `json:"typeId"`
	Required string `json:"required"`
	Type     *struct {
		Class      string   `json:"class"`
		ElemTypeID string   `json:"elemTypeId"`
		ElemType   *typeRef `json:"elemType"`
	} `json:"type"`
	// Default is the field's default value in the IDL, absent when it has none.
	Default json.RawMessage `json:"default"`
}

type service struct {
	Name        string            `json:"name"`
	Extends     string            `json:"extends"`
	Annotations map[string]string `json:"annotations"`
	Functions   []function        `json:"functions"`
}

type function struct {
	Name         string            `json:"name"`
	Oneway       bool              `json:"oneway"`
	Doc          string            `json:"doc"`
	ReturnTypeID string            `json:"returnTypeId"`
	ReturnType   *typeRef          `json:"returnType"`
	Annotations  map[string]string `json:"annotations"`
	Arguments    []field           `json:"arguments"`
	Exceptions   []field           `json:"exceptions"`
}

type typeRef struct {
	TypeID string `json:"typeId"`
	Class  string `json:"class"`
	// ElemTypeID and ElemType are the element type of a list or a set.
	ElemTypeID string   `json:"elemTypeId"`
	ElemType   *typeRef `json:"elemType"`
}

// parseProgram decodes the JSON that `thrift --gen json` writes for one IDL file.
func parseProgram(data []byte) (*program, error) {
	var p program
	if err := json.Unmarshal(data, &p); err != nil {
		return nil, fmt.Errorf("decoding thrift JSON: %w", err)
	}
	return &p, nil
}

// loadIDL runs the Thrift compiler's JSON generator on idlPath and decodes its output.
func loadIDL(thriftBin, idlPath string) (*program, error) {
	dir, err := os.MkdirTemp("", "zarisgen-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	cmd := exec.Command(thriftBin, "--gen", "json", "-out", dir, idlPath)
	if out, err := cmd.CombinedOutput(); err != nil {
		// exec.ErrNotFound: a name not on PATH; fs.ErrNotExist: a path to no file.
		if errors.Is(err, exec.ErrNotFound) || (errors.Is(err, fs.ErrNotExist) && len(out) == 0) {
			return nil, fmt.Errorf("zarisgen: the Thrift compiler %q was not found: install Thrift %s "+
				"(apt-get install thrift-compiler, on Debian 12), or name the binary with -thrift", thriftBin, thriftVersion)
		}
		return nil, fmt.Errorf("%s --gen json %s: %w\n%s", thriftBin, idlPath, err, strings.TrimSpace(string(out)))
	}
	base := strings.TrimSuffix(filepath.Base(idlPath), filepath.Ext(idlPath))
	data, err := os.ReadFile(filepath.Join(dir, base+".json"))
	if err != nil {
		return nil, fmt.Errorf("reading thrift JSON output: %w", err)
	}
	p, err := parseProgram(data)
	if err != nil {
		return nil, err
	}
	if text, err := os.ReadFile(idlPath); err == nil {
		p.lines = strings.Split(string(text), "\n")
	}
	return p, nil
}

// structByName is p's struct, exception or union named name, or nil.
func (p *program) structByName(name string) *structType {
	return firstWhere(p.Structs, func(s *structType) bool { return s.Name == name })
}

// enumByName is p's enum named name, or nil.
func (p *program) enumByName(name string) *enum {
	return firstWhere(p.Enums, func(e *enum) bool { return e.Name == name })
}

// fieldByName is s's field named name, or nil.
func (s *structType) fieldByName(name string) *field {
	return firstWhere(s.Fields, func(f *field) bool { return f.Name == name })
}

// fieldByKey is s's field of id key, or nil.
func (s *structType) fieldByKey(key int) *field {
	return firstWhere(s.Fields, func(f *field) bool { return f.Key == key })
}

// firstWhere is the first element of list that match accepts, in place, or nil.
func firstWhere[T any](list []T, match func(*T) bool) *T {
	for i := range list {
		if match(&list[i]) {
			return &list[i]
		}
	}
	return nil
}

// goPackage is the Go package the Thrift compiler writes for p: its directory below the
// compiler's -out, which is also its import path after the package_prefix (the IDL's
// `namespace go`, or else its `namespace *`, or else the file's name, with the dots as
// slashes), and the namespace's language ("go", "*", or "" for none).
func (p *program) goPackage() (path, lang string) {
	for _, lang := range []string{"go", "*"} {
		if ns, ok := p.Namespaces[lang]; ok {
			return strings.ReplaceAll(ns, ".", "/"), lang
		}
	}
	return p.Name, ""
}

// zarisPackagePath is goPackage's path for Zaris's own IDL: defaultZarisImport without the
// package_prefix `make generate` passes.
const zarisPackagePath = "zaris"

// checkZarisNamespace refuses, when -zaris-import is not given, an IDL whose Thrift-generated
// Go package is not Zaris's: the generated client would import Zaris's package
// (defaultZarisImport) for another service's types and not compile.
func checkZarisNamespace(p *program, source string) error {
	got, lang := p.goPackage()
	if got == zarisPackagePath {
		return nil
	}
	where, what := source, fmt.Sprintf("no namespace go, so its package is named after the file: %s", got)
	if lang != "" {
		l := p.find(regexp.MustCompile(`^\s*namespace\s+`+regexp.QuoteMeta(lang)+`\s`), 0)
		where, what = pos(source, l), fmt.Sprintf("namespace %s %s", lang, p.Namespaces[lang])
	}
	return fmt.Errorf("zarisgen: %s: %s: not Zaris's IDL (namespace go %s), so the client cannot import Zaris's package %s: "+
		"pass -zaris-import with the import path of the package the Thrift compiler writes for this IDL (its package_prefix followed by %s)",
		where, what, zarisPackagePath, defaultZarisImport, got)
}
