package dataplane

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
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
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read state file: %w", err)
	}
	defer f.Close()
	tooLarge := func(size int64) error {
		return &StateFileError{File: path, Index: -1, Err: fmt.Errorf("%d MiB, more than the %d MiB a state file may hold", size>>20, MaxStateFileSize>>20)}
	}
	if st, err := f.Stat(); err == nil && st.Mode().IsRegular() && st.Size() > MaxStateFileSize {
		return nil, tooLarge(st.Size())
	}
	// The limit holds for what is not a regular file, or one that grows
	// while it is read, too.
	data, err := io.ReadAll(io.LimitReader(f, MaxStateFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("read state file: %w", err)
	}
	if len(data) > MaxStateFileSize {
		return nil, tooLarge(int64(len(data)))
	}
	return ParseStateFile(path, data)
}

// MaxStateFileSize is the largest state file nftep reads: 64 MiB, ten times
// a node of 10,000 workloads in YAML. Parsing takes several times a file's
// size in memory, so a larger one is refused before it is read, and the
// running ruleset stays as it was.
const MaxStateFileSize = 64 << 20

// protojsonPosition is the "(line 1:45): " protojson puts in its errors: a
// position in the re-encoded fragment of one update, meaningless to the
// file's author, who gets the update's index instead.
// (protobuf-go writes some of those spaces as U+00A0 on purpose.)
var protojsonPosition = regexp.MustCompile(`^proto:[\s\x{a0}]*(\(line \d+:\d+\):[\s\x{a0}]*)?`)

// ParseStateFile parses data, the content of the state file name (which is
// only used in messages).
func ParseStateFile(name string, data []byte) (*StateFile, error) {
	fileErr := func(field string, err error) error {
		return &StateFileError{File: name, Index: -1, Field: field, Err: err}
	}
	// YAML is a superset of JSON: the YAML path reads both, and reports
	// syntax errors with their line. A file that is JSON already skips it:
	// the YAML parser builds a node tree of the whole file, and takes 3.5
	// times as long and 6.5 times the allocations of encoding/json
	// (BenchmarkParseStateFile), which is why JSON is the format for large
	// nodes. A file that starts like JSON
	// but does not decode as a JSON object goes the YAML way, for the line
	// in its error.
	var top map[string]json.RawMessage
	if !looksLikeJSON(data) || json.Unmarshal(data, &top) != nil {
		js, err := yaml.YAMLToJSON(data)
		if err != nil {
			return nil, fileErr("", err)
		}
		if isJSONNull(js) {
			return nil, fileErr("", errors.New("the file is empty"))
		}
		top = nil
		if err := json.Unmarshal(js, &top); err != nil {
			return nil, fileErr("", errors.New("want a map with keys config and updates"))
		}
	}
	sf := &StateFile{Path: name, Config: map[string]string{}}
	for key, raw := range top {
		switch key {
		case "config":
			if err := parseConfigMap(raw, sf.Config); err != nil {
				return nil, fileErr("config", err)
			}
		case "updates":
			var updates []json.RawMessage
			if err := json.Unmarshal(raw, &updates); err != nil && !isJSONNull(raw) {
				return nil, fileErr("updates", errors.New("want a list of Felix messages"))
			}
			for i, u := range updates {
				m := new(proto.ToDataplane)
				if err := protojson.Unmarshal(u, m); err != nil {
					msg := protojsonPosition.ReplaceAllString(err.Error(), "")
					return nil, &StateFileError{File: name, Index: i, What: payloadNameJSON(u), Err: errors.New(msg)}
				}
				sf.Updates = append(sf.Updates, m)
			}
		default:
			return nil, fileErr(key, errors.New("unknown key (want config and updates)"))
		}
	}
	return sf, nil
}

// parseConfigMap reads the config map: Felix keys to scalar values, which
// are kept as the strings Felix would send (`VXLANPort: 4789` is "4789").
func parseConfigMap(raw json.RawMessage, out map[string]string) error {
	if isJSONNull(raw) {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var kv map[string]any
	if err := dec.Decode(&kv); err != nil {
		return errors.New("want a map of Felix settings")
	}
	for k, v := range kv {
		switch v := v.(type) {
		case string:
			out[k] = v
		case json.Number:
			out[k] = v.String()
		case bool:
			out[k] = fmt.Sprint(v)
		case nil:
			out[k] = ""
		case []any:
			return fmt.Errorf("%s: want a string, number or boolean, not a list", k)
		default:
			return fmt.Errorf("%s: want a string, number or boolean, not a map", k)
		}
	}
	return nil
}

// looksLikeJSON says whether data starts like a JSON object.
func looksLikeJSON(data []byte) bool {
	t := bytes.TrimLeft(data, " \t\r\n")
	return len(t) > 0 && t[0] == '{'
}

func isJSONNull(raw json.RawMessage) bool {
	return bytes.Equal(bytes.TrimSpace(raw), []byte("null"))
}

// payloadNameJSON guesses the payload of an update that did not decode, for
// the error message: its first key.
func payloadNameJSON(raw json.RawMessage) string {
	var kv map[string]json.RawMessage
	if json.Unmarshal(raw, &kv) != nil {
		return ""
	}
	for k := range kv {
		if k != "sequenceNumber" && k != "sequence_number" {
			return k
		}
	}
	return ""
}

// Payload returns the message inside a ToDataplane envelope, or nil when it
// carries none nftep knows (a payload felix.proto reserves).
func Payload(m *proto.ToDataplane) gproto.Message {
	rm := m.ProtoReflect()
	fd := rm.WhichOneof(rm.Descriptor().Oneofs().ByName("payload"))
	if fd == nil {
		return nil
	}
	return rm.Get(fd).Message().Interface()
}

// payloadName returns the protojson name of the envelope's payload field
// ("workloadEndpointUpdate"), or "" when it has none.
func payloadName(m *proto.ToDataplane) string {
	rm := m.ProtoReflect()
	fd := rm.WhichOneof(rm.Descriptor().Oneofs().ByName("payload"))
	if fd == nil {
		return ""
	}
	return fd.JSONName()
}
