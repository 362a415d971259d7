package main

import (
	"fmt"
	"go/token"
	"path"
	"slices"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"
)

// The operation annotations zarisgen reads (see the header of idl/zaris.thrift).
const (
	annKind       = "zaris.kind"
	annIdempotent = "zaris.idempotent"
	annRouting    = "zaris.routing"
	annGuards     = "zaris.guards"
	annResults    = "zaris.results"
	// annMapOp, on the service, names the operation that returns the node's cluster map.
	annMapOp = "zaris.map_operation"
)

// serviceAnnotations are the annotations zarisgen knows on the service.
var serviceAnnotations = []string{annMapOp}

// opAnnotations are the annotations zarisgen knows on an operation.
var opAnnotations = []string{annKind, annIdempotent, annRouting, annGuards, annResults, annDedup}

// model is everything the templates need, derived from one IDL.
type model struct {
	// Source is the IDL path named in the generated header.
	Source string
	// Service is the IDL service name.
	Service string
	// MapOp is the Go name of the map operation (zaris.map_operation).
	MapOp string
	// Map is the shape of the map operation's struct, which the generated code converts
	// into a clustermap.Map.
	Map *mapModel
	// ZarisImport is the import path of the thrift-generated package.
	ZarisImport string
	// Ops are the single-key data operations, in IDL order.
	Ops []opModel
	// BatchOps are the multi-key data operations, in IDL order.
	BatchOps []opModel
	// Status is the class table of the status enum.
	Status *statusModel
	// Server is every method of the service, for the Unimplemented base.
	Server []serverMethod
	// ClientPackage is the Go package name of the typed client: zarisclient unless run
	// names another output directory.
	ClientPackage string
	// ServerPackage is the Go package name of the Unimplemented base.
	ServerPackage string
	// GoGenerate is the command of the client's //go:generate directive; none when empty.
	GoGenerate string
	// CodecImport is the import path of the generated codec (-codec-out), which the
	// operations' descriptors then carry; empty: none.
	CodecImport string
	// Version is zarisgen's version, VersionCheck the runtime constant the generated code
	// refers to (see version.go).
	Version, VersionCheck string
}

// opModel is one data operation.
type opModel struct {
	Name         string // the Go name the Thrift compiler gives the method
	IDLName      string // the name in the IDL, which is also the name on the wire
	Doc          string
	Kind         string // "read" or "write"
	Idempotent   bool
	RoutingField string
	RoutingExpr  string // Go expression for the routing key bytes of req
	Guards       []string
	GuardExpr    string      // Go expression: does req carry a guard
	Request      string      // Go type name of the request struct
	ArgField     string      // Go name of the request's field in the operation's argument struct
	Response     string      // Go type name of the response struct
	Batch        *batchModel // set for a multi-key operation
	Dedup        *dedupModel // set for an operation with a request token (zaris.dedup)
}

// HasDedup reports whether some operation carries a request token (zaris.dedup), so the
// client needs a token source.
func (m *model) HasDedup() bool {
	return slices.ContainsFunc(m.Ops, func(o opModel) bool { return o.Dedup != nil })
}

// CodecPackage is the name the client refers to the codec's package by: its path's last
// element.
func (m *model) CodecPackage() string { return path.Base(m.CodecImport) }

// KindConst is the runtime constant for the operation's kind.
func (o opModel) KindConst() string {
	if o.Kind == "read" {
		return "runtime.Read"
	}
	return "runtime.Write"
}

// ResultAlias is the name of the alias the client declares for a multi-key operation's
// result, batch.Result of its response: KV names the result by it, since mockgen
// v1.6.0 cannot read a generic type.
func (o opModel) ResultAlias() string { return o.Name + "Result" }

// specError is an IDL that zarisgen cannot serve. It names the IDL file and line, the
// operation and, where one is at fault, the field or annotation.
type specError struct {
	Pos   string // the IDL file and line, or the file alone
	Op    string
	Field string
	Msg   string
}

func (e *specError) Error() string {
	var b strings.Builder
	b.WriteString("zarisgen: ")
	if e.Pos != "" {
		b.WriteString(e.Pos + ": ")
	}
	if e.Op != "" {
		fmt.Fprintf(&b, "operation %s: ", e.Op)
	}
	if e.Field != "" {
		fmt.Fprintf(&b, "%s: ", e.Field)
	}
	b.WriteString(e.Msg)
	return b.String()
}

// buildModel checks the IDL against what the typed client needs and derives the model.
func buildModel(p *program, source, zarisImport string) (*model, error) {
	p.source = source
	svc, statusEnum, err := checkService(p, source)
	if err != nil {
		return nil, err
	}
	m := &model{Source: source, Service: goName(svc.Name), ZarisImport: zarisImport, ClientPackage: "zarisclient",
		Version: version, VersionCheck: versionCheck()}
	if err := addOps(p, source, svc, statusEnum.Name, m); err != nil {
		return nil, err
	}
	if err := checkResultAliases(p, source, svc.Name, m); err != nil {
		return nil, err
	}
	if len(m.Ops)+len(m.BatchOps) == 0 {
		return nil, &specError{Pos: pos(source, p.declLine("service", svc.Name)), Msg: fmt.Sprintf("service %s has no data operations (zaris.kind read or write)", svc.Name)}
	}
	if m.MapOp, m.Map, err = mapOperation(p, source, svc); err != nil {
		return nil, err
	}
	if m.Status, err = buildStatus(p, source, statusEnum, len(m.BatchOps) > 0); err != nil {
		return nil, err
	}
	if m.Server, err = buildServer(p, svc); err != nil {
		return nil, err
	}
	return m, nil
}

// checkService returns the IDL's one service, whose name must be an identifier, which must
// extend none and whose annotations must be known, and the status enum.
func checkService(p *program, source string) (service, *enum, error) {
	if len(p.Services) != 1 {
		return service{}, nil, &specError{Pos: source, Msg: fmt.Sprintf("the IDL must declare exactly one service, found %d", len(p.Services))}
	}
	svc := p.Services[0]
	if !token.IsIdentifier(svc.Name) {
		return service{}, nil, &specError{Pos: source, Msg: fmt.Sprintf("service name %q is not an identifier", svc.Name)}
	}
	statusEnum, err := statusEnumOf(p, source)
	if err != nil {
		return service{}, nil, err
	}
	svcLine := p.declLine("service", svc.Name)
	if svc.Extends != "" {
		return service{}, nil, &specError{Pos: pos(source, svcLine), Field: "service " + svc.Name,
			Msg: fmt.Sprintf("extends %s: inherited operations are not supported; declare them in %s", svc.Extends, svc.Name)}
	}
	if err := checkAnnotations(svc.Annotations, serviceAnnotations, func(key, msg string) error {
		return &specError{Pos: pos(source, p.annotationLine(svcLine, key)), Field: "service " + svc.Name + ": annotation " + key, Msg: msg}
	}); err != nil {
		return service{}, nil, err
	}
	return svc, statusEnum, nil
}

// addOps builds the operations of svc and adds its data operations to m, the multi-key ones
// to m.BatchOps and the others to m.Ops, in the IDL's order. It refuses two operations that
// become the same Go method and a data operation named as a method of the client's own.
func addOps(p *program, source string, svc service, statusEnum string, m *model) error {
	goNames := map[string]string{}
	for _, fn := range svc.Functions {
		op, data, err := buildOp(p, svc.Name, statusEnum, fn)
		if err != nil {
			return err
		}
		if prev, ok := goNames[goName(fn.Name)]; ok {
			return &specError{Pos: pos(source, p.functionLine(svc.Name, fn.Name)), Op: fn.Name,
				Msg: fmt.Sprintf("operation %s and operation %s both become the Go method %s", prev, fn.Name, goName(fn.Name))}
		}
		goNames[goName(fn.Name)] = fn.Name
		if data && clientMethods[op.Name] {
			return &specError{Pos: pos(source, p.functionLine(svc.Name, fn.Name)), Op: fn.Name, Msg: fmt.Sprintf("operation name %s is taken by the client's own method %s", op.Name, op.Name)}
		}
		switch {
		case data && op.Batch != nil:
			m.BatchOps = append(m.BatchOps, op)
		case data:
			m.Ops = append(m.Ops, op)
		}
	}
	return nil
}

// checkResultAliases refuses a multi-key operation whose result alias (ResultAlias) is the
// name of another operation's descriptor (Op<name>), which would not compile.
func checkResultAliases(p *program, source, svc string, m *model) error {
	descriptors := map[string]string{}
	for _, op := range append(slices.Clone(m.Ops), m.BatchOps...) {
		descriptors["Op"+op.Name] = op.IDLName
	}
	for _, op := range m.BatchOps {
		if other, ok := descriptors[op.ResultAlias()]; ok {
			return &specError{Pos: pos(source, p.functionLine(svc, op.IDLName)), Op: op.IDLName,
				Msg: fmt.Sprintf("its result type %s is the name of operation %s's descriptor", op.ResultAlias(), other)}
		}
	}
	return nil
}

// clientMethods are the generated Client's methods besides the operations; an operation
// of the same name would not compile.
var clientMethods = map[string]bool{"Close": true, "Engine": true}

// checkAnnotations refuses, through fail, an annotation in anns that starts with "zaris."
// but is not in known, or that is a near miss of one of known (see nearAnnotation).
// Other annotations (another tool's) pass.
func checkAnnotations(anns map[string]string, known []string, fail func(key, msg string) error) error {
	keys := make([]string, 0, len(anns))
	for k := range anns {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if slices.Contains(known, k) {
			continue
		}
		if near := nearAnnotation(k, allAnnotations()); near != "" || strings.HasPrefix(strings.ToLower(k), "zaris.") {
			where := "none here"
			if len(known) > 0 {
				where = strings.Join(known, ", ")
			}
			return fail(k, fmt.Sprintf("unknown annotation%s; known here: %s", didYouMean(near), where))
		}
	}
	return nil
}

// allAnnotations is every annotation zarisgen reads, anywhere.
func allAnnotations() []string {
	return slices.Concat(opAnnotations, enumAnnotations, serviceAnnotations)
}

// checkResponse checks that resp has the status and mapEpoch every data response carries;
// it returns the field at fault and why, or an empty msg.
func checkResponse(p *program, resp *structType, statusEnum string) (field, msg string) {
	if msg := statusField(p, resp, "response", statusEnum); msg != "" {
		return "field status", msg
	}
	if e := resp.fieldByName("mapEpoch"); e == nil || e.TypeID != "i64" {
		return "field mapEpoch", fmt.Sprintf("response struct %s must carry mapEpoch: i64, the answering node's map epoch", resp.Name)
	}
	return "", ""
}

// statusField checks that field 1 of s (a response or a per-item result struct, as what
// says) is status of the status enum. The JSON turns an enum into i32, so the type is read
// from the IDL text when zarisgen has it.
func statusField(p *program, s *structType, what, statusEnum string) string {
	status := s.fieldByKey(1)
	if status == nil || status.Name != "status" || status.TypeID != "i32" || p.enumByName(statusEnum) == nil {
		found := "nothing"
		if status != nil {
			found = fmt.Sprintf("%s %s", status.TypeID, status.Name)
		}
		return fmt.Sprintf("field 1 of %s struct %s must be status: %s, found %s", what, s.Name, statusEnum, found)
	}
	if typ := p.fieldType(s.Name, status.Name); typ != "" && typ != statusEnum {
		return fmt.Sprintf("field 1 of %s struct %s must be status: %s, found %s status", what, s.Name, statusEnum, typ)
	}
	return ""
}

// commentText is doc as one line of a Go comment: its words joined by single spaces, with
// the runes a Go comment cannot hold (NUL and other control characters, the byte-order
// mark, and the replacement of invalid UTF-8) turned into spaces.
func commentText(doc string) string {
	return strings.Join(strings.Fields(strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || r == '\uFEFF' || r == utf8.RuneError {
			return ' '
		}
		return r
	}, doc)), " ")
}
