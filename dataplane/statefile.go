package dataplane

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"google.golang.org/protobuf/encoding/protojson"
	gproto "google.golang.org/protobuf/proto"
	"sigs.k8s.io/yaml"

	"github.com/nftep/nftep/proto"
)

// StateFile is a node's desired state as a file: Felix's configuration and
// the Felix messages that build the state, in order. The format (YAML or
// JSON, the messages in protojson, field names in camelCase or snake_case):
//
//	config:                       # Felix keys, as in ConfigUpdate.config
//	  InterfacePrefix: cali
//	updates:                      # felix.ToDataplane envelopes
//	  - activeProfileUpdate: {id: {name: allow-egress}, profile: {...}}
//	  - workloadEndpointUpdate: {id: {...}, endpoint: {...}}
//
// The updates are folded in order into a Snapshot: the file is the whole
// desired state, and a later version of it replaces the earlier one.
type StateFile struct {
	// Path is where the file was read from (for messages).
	Path string
	// Config is the `config:` map.
	Config map[string]string
	// Updates are the `updates:` envelopes, in file order.
	Updates []*proto.ToDataplane
	// JSON is the file as JSON: the file itself, or for a file in YAML
	// the JSON the YAML parser turned it into (keys sorted).
	JSON []byte
	// Spans are where each update is in JSON: Spans[i] is the offset of
	// the '{' that starts Updates[i] and the offset just behind the '}'
	// that ends it (JSON[s[0]:s[1]] is the update's JSON, as written).
	Spans [][2]int
}

// StateFileError is an error in a state file. Its text names the file, the
// update and the field: `state file "node.yaml": updates[3]
// (workloadEndpointUpdate k8s/default/pod-a/eth0): endpoint.ipv4Nets[0]:
// "10.0.0.300/32" is not an IPv4 CIDR or address`.
type StateFileError struct {
	// File is the file's path.
	File string
	// Index is the position of the update in `updates:`, or -1 for an error
	// outside them.
	Index int
	// What names the update: its payload and the object's ID.
	What string
	// Field is the path of the offending field inside the update (or the
	// top-level key), in protojson names; may be empty.
	Field string
	// Err says what is wrong.
	Err error
}

// Error implements error.
func (e *StateFileError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "state file %q: ", e.File)
	if e.Index >= 0 {
		fmt.Fprintf(&b, "updates[%d]", e.Index)
		if e.What != "" {
			fmt.Fprintf(&b, " (%s)", e.What)
		}
		b.WriteString(": ")
	}
	if e.Field != "" {
		b.WriteString(e.Field + ": ")
	}
	b.WriteString(e.Err.Error())
	return b.String()
}

// Unwrap returns the underlying error.
func (e *StateFileError) Unwrap() error { return e.Err }

// LoadStateFile reads and parses the state file at path (see StateFile).
// It checks the syntax and each message's shape; Snapshot and Validate check
// the rest.
func LoadStateFile(path string) (*StateFile, error) {
	data, err := readStateFile(path)
	if err != nil {
		return nil, err
	}
	return ParseStateFile(path, data)
}

// mapStateFile is readStateFile mapping the file when it can (see
// mapFile); release, never nil, ends the mapping: nothing of data may be
// used after it.
func mapStateFile(path string) (data []byte, release func(), err error) {
	data, release, err = mapFile(path, MaxStateFileSize)
	if err == nil {
		return data, release, nil
	}
	data, err = readStateFile(path)
	return data, func() {}, err
}

// readStateFile reads the state file at path, refusing one larger than
// MaxStateFileSize.
func readStateFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read state file: %w", err)
	}
	defer f.Close()
	tooLarge := func(size int64) error {
		return &StateFileError{File: path, Index: -1, Err: fmt.Errorf("%d MiB, more than the %d MiB a state file may hold", size>>20, MaxStateFileSize>>20)}
	}
	size := 0
	if st, err := f.Stat(); err == nil && st.Mode().IsRegular() {
		if st.Size() > MaxStateFileSize {
			return nil, tooLarge(st.Size())
		}
		size = int(st.Size())
	}
	// The limit holds for what is not a regular file, or one that grows
	// while it is read, too. A regular file is read into a buffer of its
	// size (one more byte to see the end): no copies as it grows.
	var buf bytes.Buffer
	buf.Grow(size + 512)
	if _, err := buf.ReadFrom(io.LimitReader(f, MaxStateFileSize+1)); err != nil {
		return nil, fmt.Errorf("read state file: %w", err)
	}
	data := buf.Bytes()
	if len(data) > MaxStateFileSize {
		return nil, tooLarge(int64(len(data)))
	}
	return data, nil
}

// MaxStateFileSize is the largest state file nftep reads: 64 MiB, ten times
// a node of 10,000 workloads in YAML. Parsing takes several times a file's
// size in memory, so a larger one is refused before it is read, and the
// running ruleset stays as it was.
const MaxStateFileSize = 64 << 20

// ParseStateFile parses data, the content of the state file name (which is
// only used in messages).
//
// JSON is read as a stream: the top-level object and the `updates` list
// token by token, each update decoded straight into its message by the
// generated decoder of package proto (the same fields, names and values
// protojson.Unmarshal accepts), never as a tree of the whole file. YAML is
// a superset of JSON: a file that does not start like a JSON object, or is
// not JSON after all (a syntax error anywhere), goes through the YAML
// parser, which reports syntax errors with their line, and the JSON it
// turns the file into is read the same way. The YAML parser builds a node
// tree of the whole file, which makes it several times slower than JSON
// (BenchmarkParseStateFile): JSON is the format for large nodes.
func ParseStateFile(name string, data []byte) (*StateFile, error) {
	if looksLikeJSON(data) {
		sf, err, syntax := parseStateJSON(name, data)
		if !syntax {
			return sf, err
		}
	}
	fileErr := func(err error) error {
		return &StateFileError{File: name, Index: -1, Err: err}
	}
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, fileErr(err)
	}
	if bytes.Equal(bytes.TrimSpace(js), []byte("null")) {
		return nil, fileErr(errors.New("the file is empty"))
	}
	sf, err, _ := parseStateJSON(name, js)
	return sf, err
}

// parseStateJSON reads a state file in JSON (see ParseStateFile), noting
// the span of each update in data. syntax says that data is not JSON (err
// is then only for a file that came from YAML).
func parseStateJSON(name string, data []byte) (sf *StateFile, err error, syntax bool) {
	fileErr := func(field string, err error) error {
		return &StateFileError{File: name, Index: -1, Field: field, Err: err}
	}
	// shapeErr is the error for JSON of the wrong shape, or for data that
	// is not JSON at all.
	shapeErr := func(err error, field string, want error) (*StateFile, error, bool) {
		var je *proto.JSONError
		if errors.As(err, &je) && je.Syntax {
			return nil, fileErr(field, err), true
		}
		return nil, fileErr(field, want), false
	}
	d := proto.NewJSONDecoder(data)
	if err := d.ObjectStart(); err != nil {
		return shapeErr(err, "", errors.New("want a map with keys config and updates"))
	}
	sf = &StateFile{Path: name, Config: map[string]string{}, JSON: data}
	var seenConfig, seenUpdates bool
	for first := true; ; first = false {
		key, more, err := d.NextKey(first)
		if err != nil {
			return nil, fileErr("", err), true
		}
		if !more {
			break
		}
		switch string(key) {
		case "config":
			if seenConfig {
				return nil, fileErr("config", errors.New("given twice")), false
			}
			seenConfig = true
			if err, syntax := parseConfigJSON(d, sf.Config); err != nil {
				return nil, fileErr("config", err), syntax
			}
		case "updates":
			if seenUpdates {
				return nil, fileErr("updates", errors.New("given twice")), false
			}
			seenUpdates = true
			if d.IsNull() {
				continue
			}
			if err := d.ArrayStart(); err != nil {
				return shapeErr(err, "updates", errors.New("want a list of Felix messages"))
			}
			for i := 0; ; i++ {
				more, err := d.ArrayNext(i == 0)
				if err != nil {
					return nil, fileErr("updates", err), true
				}
				if !more {
					break
				}
				start := d.Offset()
				env := new(proto.ToDataplane)
				if err := d.Decode(env); err != nil {
					var je *proto.JSONError
					if errors.As(err, &je) && je.Syntax {
						return nil, fileErr("", err), true
					}
					return nil, updateDecodeError(name, i, env, data[start:], err), false
				}
				sf.Updates = append(sf.Updates, env)
				sf.Spans = append(sf.Spans, [2]int{start, d.Offset()})
			}
		default:
			return nil, fileErr(string(key), errors.New("unknown key (want config and updates)")), false
		}
	}
	if err := d.End(); err != nil {
		return nil, fileErr("", err), true
	}
	return sf, nil, false
}

// parseConfigJSON reads the config map: Felix keys to scalar values, which
// are kept as the strings Felix would send (`VXLANPort: 4789` is "4789").
func parseConfigJSON(d *proto.JSONDecoder, out map[string]string) (err error, syntax bool) {
	isSyntax := func(err error) bool {
		var je *proto.JSONError
		return errors.As(err, &je) && je.Syntax
	}
	if d.IsNull() {
		return nil, false
	}
	if err := d.ObjectStart(); err != nil {
		if isSyntax(err) {
			return err, true
		}
		return errors.New("want a map of Felix settings"), false
	}
	for first := true; ; first = false {
		key, more, err := d.NextKey(first)
		if err != nil {
			return err, true
		}
		if !more {
			return nil, false
		}
		k := string(key)
		kind, text, err := d.ReadScalar()
		switch {
		case err != nil:
			return err, isSyntax(err)
		case kind == proto.ScalarArray:
			return fmt.Errorf("%s: want a string, number or boolean, not a list", k), false
		case kind == proto.ScalarObject:
			return fmt.Errorf("%s: want a string, number or boolean, not a map", k), false
		}
		out[k] = text
	}
}

// updateDecodeError is the StateFileError for update i, which did not
// decode (env holds what did, raw starts with the update): it names the
// payload, the object and the field.
func updateDecodeError(file string, i int, env *proto.ToDataplane, raw []byte, err error) error {
	sfe := &StateFileError{File: file, Index: i, Err: err}
	var je *proto.JSONError
	if !errors.As(err, &je) {
		return sfe
	}
	path := je.Path
	sfe.Err = errors.New(je.Msg)
	payload, msg := env.WhichPayload()
	if payload == "" || !strings.HasPrefix(path, payload) {
		sfe.Field = path
		return sfe
	}
	sfe.What = payload
	sfe.Field = strings.TrimPrefix(strings.TrimPrefix(path, payload), ".")
	if pm, ok := msg.(gproto.Message); ok {
		if id := objectIDOf(pm, payload, raw); id != "" {
			sfe.What += " " + id
		}
	}
	return sfe
}

// objectIDOf names the object of an update that did not decode: the
// fields of its payload that do decode, taken one at a time, give the ID
// when they hold it (the keys of a file that came from YAML are sorted, so
// the ID often comes after the field in error).
func objectIDOf(partial gproto.Message, payload string, raw []byte) string {
	var env map[string]json.RawMessage
	if json.NewDecoder(bytes.NewReader(raw)).Decode(&env) != nil {
		return ""
	}
	var fields map[string]json.RawMessage
	for k, v := range env {
		if isPayloadKey(k, payload) {
			if json.Unmarshal(v, &fields) != nil {
				return ""
			}
		}
	}
	m := partial.ProtoReflect().New().Interface()
	for k, v := range fields {
		one := partial.ProtoReflect().New().Interface()
		kj, _ := json.Marshal(k)
		if protojson.Unmarshal([]byte("{"+string(kj)+":"+string(v)+"}"), one) == nil {
			gproto.Merge(m, one)
		}
	}
	id := objectID(m)
	if strings.Trim(id, "/") == "" {
		return ""
	}
	return id
}

// isPayloadKey says whether the envelope key k is the payload field of
// the JSON name payload (by its JSON or its proto name).
func isPayloadKey(k, payload string) bool {
	fd := (&proto.ToDataplane{}).ProtoReflect().Descriptor().Fields().ByJSONName(payload)
	return fd != nil && (k == payload || k == string(fd.Name()))
}

// looksLikeJSON says whether data starts like a JSON object.
func looksLikeJSON(data []byte) bool {
	t := bytes.TrimLeft(data, " \t\r\n")
	return len(t) > 0 && t[0] == '{'
}

// Payload returns the message inside a ToDataplane envelope, or nil when it
// carries none nftep knows (a payload felix.proto reserves). No
// reflection: WhichPayload is generated.
func Payload(m *proto.ToDataplane) gproto.Message {
	_, v := m.WhichPayload()
	msg, _ := v.(gproto.Message)
	return msg
}

// payloadName returns the protojson name of the envelope's payload field
// ("workloadEndpointUpdate"), or "" when it has none.
func payloadName(m *proto.ToDataplane) string {
	name, _ := m.WhichPayload()
	return name
}
