// Package proto3 renders the API's .proto files (api/proto, edition 2023:
// the source) as proto3 files (api/proto3), for toolchains without editions
// support: protoc before 27, and the grpc_tools, protobuf and grpcio of
// Debian and Ubuntu (Debian 12: protoc 3.21, grpc_tools 1.14).
//
// Why two renderings rather than a proto3 source: the source turns off
// UTF-8 validation in decoders generated from it (features.utf8_validation
// = NONE), so that coordd itself answers a string with invalid UTF-8 with
// INVALID_ARGUMENT naming the field; grpc-go answers a decoder's error with
// INTERNAL, before any of coordd's code runs. proto3 cannot say NONE. Every
// other feature the source sets is proto3's own (implicit presence, open
// enums, packed repeated scalars), so the two describe the same messages,
// fields, numbers and wire format; decoders built from the rendering check
// UTF-8 in strings, which clients in other languages always send valid.
//
// The rendering is committed; TestRenderingIsCurrent fails when it drifts
// from the source. After changing api/proto, regenerate it with
//
//	go test ./api/proto3 -run TestRenderingIsCurrent -update
package proto3

import (
	"bufio"
	"bytes"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// The lines of the source that the rendering replaces or drops. Any other
// use of editions features is refused: it may mean something proto3 cannot
// say.
const (
	editionLine  = `edition = "2023";`
	presenceLine = `option features.field_presence = IMPLICIT;`
	utf8Line     = `option features.utf8_validation = NONE;`
)

// Render returns the proto3 rendering of src, the source file at path
// (named in the rendering's header): the comment lines before the edition
// line (about the edition) give way to a header, the edition line becomes
// syntax = "proto3", and the two file-wide feature options go; every other
// line is kept as it is, but reserved names, which proto3 quotes.
func Render(path string, src []byte) ([]byte, error) {
	var out bytes.Buffer
	fmt.Fprintf(&out, "// Code generated from %s by api/proto3 (go test ./api/proto3 -update); DO NOT EDIT.\n", path)
	out.WriteString("// The proto3 rendering of the edition 2023 source, for protoc before 27 and\n" +
		"// Debian's grpc_tools: the same messages, fields and wire format. See\n" +
		"// api/proto3/render.go.\n")
	sc := bufio.NewScanner(bytes.NewReader(src))
	var edition, presence, utf8 bool
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		switch {
		case !edition && strings.HasPrefix(trimmed, "//"):
			continue // the source's note on its edition
		case !edition && trimmed == editionLine:
			edition = true
			out.WriteString(`syntax = "proto3";` + "\n")
			continue
		case !edition && trimmed != "":
			return nil, fmt.Errorf("%s:%d: %q before the edition line %s", path, n, line, editionLine)
		case trimmed == presenceLine:
			presence = true
			continue
		case trimmed == utf8Line:
			utf8 = true
			continue
		case strings.Contains(stripComment(line), "features."):
			return nil, fmt.Errorf("%s:%d: editions feature proto3 may not have: %q", path, n, trimmed)
		case reservedNames.MatchString(trimmed):
			// Editions reserve names as identifiers, proto3 as strings.
			indent := line[:len(line)-len(strings.TrimLeft(line, " \t"))]
			names := strings.Split(strings.TrimSuffix(strings.TrimPrefix(trimmed, "reserved "), ";"), ",")
			for i, name := range names {
				names[i] = strconv.Quote(strings.TrimSpace(name))
			}
			line = indent + "reserved " + strings.Join(names, ", ") + ";"
		}
		out.WriteString(line + "\n")
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if !edition || !presence || !utf8 {
		return nil, fmt.Errorf("%s: want the lines %s, %s and %s (edition %v, presence %v, utf8 %v)",
			path, editionLine, presenceLine, utf8Line, edition, presence, utf8)
	}
	return out.Bytes(), nil
}

// reservedNames matches a reserved statement of field names (editions:
// identifiers, not strings).
var reservedNames = regexp.MustCompile(`^reserved [A-Za-z_][A-Za-z0-9_]*(\s*,\s*[A-Za-z_][A-Za-z0-9_]*)*;$`)

// stripComment is line without a // comment (none of the API's string
// literals contains //).
func stripComment(line string) string {
	if i := strings.Index(line, "//"); i >= 0 {
		return line[:i]
	}
	return line
}
