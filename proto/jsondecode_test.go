package proto_test

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/known/wrapperspb"

	felix "github.com/nftep/nftep/proto"
)

// felixMessages are the message types of felix.proto, nested ones too.
func felixMessages(t testing.TB) []protoreflect.MessageType {
	t.Helper()
	var out []protoreflect.MessageType
	var walk func(protoreflect.MessageDescriptors)
	walk = func(ms protoreflect.MessageDescriptors) {
		for i := range ms.Len() {
			md := ms.Get(i)
			if md.IsMapEntry() {
				continue
			}
			mt, err := protoregistry.GlobalTypes.FindMessageByName(md.FullName())
			require.NoError(t, err)
			out = append(out, mt)
			walk(md.Messages())
		}
	}
	walk(felix.File_proto_felix_proto.Messages())
	require.Greater(t, len(out), 50)
	return out
}

// sameAsProtojson decodes data as mt with protojson and with
// felix.UnmarshalJSON and fails unless both accept it with equal results
// or both refuse it.
func sameAsProtojson(t testing.TB, mt protoreflect.MessageType, data []byte) (accepted bool) {
	t.Helper()
	want := mt.New().Interface()
	wantErr := protojson.Unmarshal(data, want)
	got := mt.New().Interface()
	gotErr := felix.UnmarshalJSON(data, got)
	name := mt.Descriptor().FullName()
	if (wantErr == nil) != (gotErr == nil) {
		t.Fatalf("%s: %q:\nprotojson: %v\nours:      %v", name, data, wantErr, gotErr)
	}
	if wantErr == nil && !proto.Equal(want, got) {
		t.Fatalf("%s: %q:\nprotojson: %v\nours:      %v", name, data, want, got)
	}
	return wantErr == nil
}

// randomMessage fills a message of mt with random content: every field
// kind, lists and maps of several entries, one member per oneof, edge
// values of numbers, strings that need escapes.
func randomMessage(r *rand.Rand, m protoreflect.Message, depth int) {
	fields := m.Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		if r.IntN(3) == 0 {
			continue
		}
		switch {
		case fd.IsList():
			l := m.Mutable(fd).List()
			for range r.IntN(4) {
				if fd.Kind() == protoreflect.MessageKind {
					v := l.NewElement()
					if depth < 4 {
						randomMessage(r, v.Message(), depth+1)
					}
					l.Append(v)
				} else {
					l.Append(randomScalar(r, fd))
				}
			}
		case fd.IsMap():
			mp := m.Mutable(fd).Map()
			for range r.IntN(4) {
				k := randomScalar(r, fd.MapKey()).MapKey()
				if fd.MapValue().Kind() == protoreflect.MessageKind {
					v := mp.NewValue()
					if depth < 4 {
						randomMessage(r, v.Message(), depth+1)
					}
					mp.Set(k, v)
				} else {
					mp.Set(k, randomScalar(r, fd.MapValue()))
				}
			}
		case fd.Kind() == protoreflect.MessageKind:
			v := m.NewField(fd)
			if depth < 4 {
				randomMessage(r, v.Message(), depth+1)
			}
			m.Set(fd, v)
		default:
			m.Set(fd, randomScalar(r, fd))
		}
	}
}

var randomStrings = []string{"", "a", "k8s/default/pod-a", "10.0.0.1/32", "fd00::1/128", "ünïcödé", "tab\there", "quote\"back\\slash",
	"\x00nul", "line\nbreak", "😀 emoji", "\u2028sep", "</script>", "ACTIVE", "NET", "IPV4"}

func randomScalar(r *rand.Rand, fd protoreflect.FieldDescriptor) protoreflect.Value {
	pick := func(vs ...int64) int64 {
		if r.IntN(2) == 0 {
			return vs[r.IntN(len(vs))]
		}
		return r.Int64N(2000) - 1000
	}
	switch fd.Kind() {
	case protoreflect.StringKind:
		if r.IntN(3) == 0 {
			return protoreflect.ValueOfString(fmt.Sprintf("s-%d", r.IntN(1000)))
		}
		return protoreflect.ValueOfString(randomStrings[r.IntN(len(randomStrings))])
	case protoreflect.BoolKind:
		return protoreflect.ValueOfBool(r.IntN(2) == 0)
	case protoreflect.Int32Kind:
		return protoreflect.ValueOfInt32(int32(pick(0, 1, -1, math.MaxInt32, math.MinInt32)))
	case protoreflect.Int64Kind:
		return protoreflect.ValueOfInt64(pick(0, 1, -1, math.MaxInt64, math.MinInt64, 1<<53+1))
	case protoreflect.Uint32Kind:
		return protoreflect.ValueOfUint32(uint32(pick(0, 1, math.MaxUint32) & math.MaxUint32))
	case protoreflect.Uint64Kind:
		if r.IntN(4) == 0 {
			return protoreflect.ValueOfUint64(math.MaxUint64)
		}
		return protoreflect.ValueOfUint64(uint64(pick(0, 1, 1<<53+1)) & math.MaxInt64)
	case protoreflect.DoubleKind:
		vs := []float64{0, 1.5, -2.25, 1e300, 5e-324, math.Inf(1), math.Inf(-1), math.NaN(), 12345678.9}
		return protoreflect.ValueOfFloat64(vs[r.IntN(len(vs))])
	case protoreflect.EnumKind:
		vals := fd.Enum().Values()
		if r.IntN(5) == 0 {
			return protoreflect.ValueOfEnum(protoreflect.EnumNumber(r.Int32N(100)))
		}
		return protoreflect.ValueOfEnum(vals.Get(r.IntN(vals.Len())).Number())
	}
	panic(fmt.Sprintf("kind %v", fd.Kind()))
}

// marshalOptions are the ways protojson writes a message: each must read back.
var marshalOptions = []protojson.MarshalOptions{
	{},
	{UseProtoNames: true},
	{UseEnumNumbers: true, EmitUnpopulated: true},
	{Multiline: true, Indent: "\t", UseProtoNames: true},
	{EmitDefaultValues: true},
}

// TestUnmarshalJSONReadsProtojson: random messages of every type, written
// by protojson in each of its styles, read back equal.
func TestUnmarshalJSONReadsProtojson(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, mt := range felixMessages(t) {
		for range 60 {
			m := mt.New()
			randomMessage(r, m, 0)
			for _, o := range marshalOptions {
				b, err := o.Marshal(m.Interface())
				require.NoError(t, err)
				require.True(t, sameAsProtojson(t, mt, b), "%s refused: %s", mt.Descriptor().FullName(), b)
			}
		}
	}
}

// randomJSON writes a JSON object for md with random keys (JSON names,
// proto names, unknown ones, repeats) and values of the right kind or
// not: the input of TestUnmarshalJSONMatchesProtojson.
func randomJSON(r *rand.Rand, b *bytes.Buffer, md protoreflect.MessageDescriptor, depth int) {
	b.WriteByte('{')
	fields := md.Fields()
	n := r.IntN(4)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		if fields.Len() == 0 || r.IntN(25) == 0 {
			fmt.Fprintf(b, "%q:", []string{"unknown", "[felix.x]", "", "tier"}[r.IntN(4)])
			randomValue(r, b, nil, depth)
			continue
		}
		fd := fields.Get(r.IntN(fields.Len()))
		name := fd.JSONName()
		if r.IntN(3) == 0 {
			name = fd.TextName()
		}
		if r.IntN(30) == 0 {
			name = strings.ToUpper(name[:1]) + name[1:]
		}
		fmt.Fprintf(b, "%q:", name)
		randomValue(r, b, fd, depth)
	}
	b.WriteByte('}')
}

// oddNumbers are numbers and number strings protojson reads in its own way.
var oddNumbers = []string{"0", "-0", "1", "-1", "1.0", "1.5", "1e2", "1E+2", "1e-2", "10e-1", "1e", "1E+", "1e-", "0.5e1",
	"2147483647", "2147483648", "-2147483648", "-2147483649", "4294967295", "4294967296", "9223372036854775807",
	"9223372036854775808", "18446744073709551615", "18446744073709551616", "-0.0", "1e400", "1e-400", "123456789012345678901",
	"1.00000000000000000000000001e20", "0e9999999999", "1e10000000000",
	`"1"`, `"-1"`, `" 1"`, `"1 "`, `"1e2"`, `"0x10"`, `"NaN"`, `"Infinity"`, `"-Infinity"`, `"nan"`, `""`, `"1.5"`, `"-0"`,
	`"18446744073709551615"`, `"9223372036854775808"`, `"\u0031"`, `"1\u00a0"`, `"+1"`, `"01"`, `"1e"`, `"1 2"`}

func randomValue(r *rand.Rand, b *bytes.Buffer, fd protoreflect.FieldDescriptor, depth int) {
	switch r.IntN(12) {
	case 0:
		b.WriteString("null")
		return
	case 1:
		b.WriteString([]string{"true", "false", `"x"`, "[]", "{}", "[null]", `["a",1]`, "{\"a\":1}", `"IPV4"`, `"NET"`, "4", `"\ud800"`}[r.IntN(12)])
		return
	case 2:
		b.WriteString(oddNumbers[r.IntN(len(oddNumbers))])
		return
	}
	if fd == nil {
		b.WriteString(`"x"`)
		return
	}
	one := func(k protoreflect.FieldDescriptor, isMsg bool) {
		switch {
		case isMsg && depth < 4:
			randomJSON(r, b, k.Message(), depth+1)
		case isMsg:
			b.WriteString("{}")
		case k.Kind() == protoreflect.EnumKind && r.IntN(2) == 0:
			vals := k.Enum().Values()
			fmt.Fprintf(b, "%q", vals.Get(r.IntN(vals.Len())).Name())
		case r.IntN(2) == 0:
			b.WriteString(oddNumbers[r.IntN(len(oddNumbers))])
		default:
			v := randomScalar(r, k)
			switch k.Kind() {
			case protoreflect.StringKind:
				fmt.Fprintf(b, "%q", v.String())
			case protoreflect.EnumKind:
				fmt.Fprint(b, int32(v.Enum()))
			case protoreflect.DoubleKind:
				fmt.Fprint(b, strconv.FormatFloat(v.Float(), 'g', -1, 64))
			default:
				fmt.Fprint(b, v.Interface())
			}
		}
	}
	switch {
	case fd.IsMap():
		b.WriteByte('{')
		for i := range r.IntN(3) {
			if i > 0 {
				b.WriteByte(',')
			}
			keys := []string{"a", "1", "01", "-1", "4294967296", "+1", "a", "1"}
			fmt.Fprintf(b, "%q:", keys[r.IntN(len(keys))])
			one(fd.MapValue(), fd.MapValue().Kind() == protoreflect.MessageKind)
		}
		b.WriteByte('}')
	case fd.IsList():
		b.WriteByte('[')
		for i := range r.IntN(3) {
			if i > 0 {
				b.WriteByte(',')
			}
			one(fd, fd.Kind() == protoreflect.MessageKind)
		}
		b.WriteByte(']')
	default:
		one(fd, fd.Kind() == protoreflect.MessageKind)
	}
}

// TestUnmarshalJSONMatchesProtojson: random JSON of every message type,
// mostly wrong in one way or another, and byte-level mutations of
// protojson's output: felix.UnmarshalJSON accepts what protojson accepts,
// with the same result, and refuses what it refuses.
func TestUnmarshalJSONMatchesProtojson(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	accepted, refused := 0, 0
	count := func(ok bool) {
		if ok {
			accepted++
		} else {
			refused++
		}
	}
	for _, mt := range felixMessages(t) {
		for range 300 {
			var b bytes.Buffer
			randomJSON(r, &b, mt.Descriptor(), 0)
			count(sameAsProtojson(t, mt, b.Bytes()))
		}
		for range 40 {
			m := mt.New()
			randomMessage(r, m, 0)
			b, err := marshalOptions[r.IntN(len(marshalOptions))].Marshal(m.Interface())
			require.NoError(t, err)
			for range 10 {
				count(sameAsProtojson(t, mt, mutate(r, b)))
			}
		}
	}
	t.Logf("%d accepted, %d refused", accepted, refused)
	assert.Greater(t, accepted, 5000)
	assert.Greater(t, refused, 5000)
}

// mutate changes b in one random place.
func mutate(r *rand.Rand, b []byte) []byte {
	out := bytes.Clone(b)
	if len(out) == 0 {
		return []byte("{")
	}
	i := r.IntN(len(out))
	insert := []string{",", "}", "]", "{", "[", ":", `"`, "\\", "null", " ", "\n", "\x00", "\xff", "e", "-", "0", ".", "\\u00", "\u00e9", "/*"}
	switch r.IntN(4) {
	case 0:
		return append(out[:i], out[i+1:]...)
	case 1:
		s := insert[r.IntN(len(insert))]
		return append(out[:i], append([]byte(s), out[i:]...)...)
	case 2:
		out[i] = insert[r.IntN(len(insert))][0]
		return out
	default:
		return out[:i]
	}
}

// TestUnmarshalJSONEdges: cases worth naming.
func TestUnmarshalJSONEdges(t *testing.T) {
	env := (&felix.ToDataplane{}).ProtoReflect().Type()
	rule := (&felix.Rule{}).ProtoReflect().Type()
	cfg := (&felix.ConfigUpdate{}).ProtoReflect().Type()
	status := (&felix.ProcessStatusUpdate{}).ProtoReflect().Type()
	for _, tc := range []struct {
		mt   protoreflect.MessageType
		data string
		ok   bool
	}{
		{env, `{}`, true},
		{env, ``, false},
		{env, ` {} `, true},
		{env, `{} {}`, false},
		{env, `{"sequenceNumber": "18446744073709551615"}`, true},
		{env, `{"sequenceNumber": 1e}`, true},
		{env, `{"sequenceNumber": 1e+}`, false},
		{env, `{"sequenceNumber": -0}`, true},
		{env, `{"sequenceNumber": "-0"}`, true},
		{env, `{"sequenceNumber": -1}`, false},
		{env, `{"sequenceNumber": 1, "sequence_number": 2}`, false},
		{env, `{"sequenceNumber": null, "sequence_number": 2}`, false},
		{env, `{"inSync": {}, "ipsetRemove": {}}`, false},
		{env, `{"inSync": null, "ipsetRemove": {"id": "x"}}`, true},
		{env, `{"ipsetUpdate": {"type": "NET"}}`, true},
		{env, `{"ipsetUpdate": {"type": 7}}`, true},
		{env, `{"ipsetUpdate": {"type": "7"}}`, false},
		{env, `{"ipsetUpdate": {"type": "net"}}`, false},
		{env, `{"ipsetUpdate": {"members": ["a", null]}}`, false},
		{env, `{"ipsetUpdate": {"id": "\ud83d\ude00"}}`, true},
		{env, `{"ipsetUpdate": {"id": "\ud83d"}}`, false},
		{env, `{"ipsetUpdate": {"id": "\udc00\udc00"}}`, false},
		{env, "{\"ipsetUpdate\": {\"id\": \"\xff\"}}", false},
		{env, "{\"ipsetUpdate\": {\"id\": \"a\tb\"}}", false},
		{env, `{"ipset_update": {"id": "x"}, }`, false},
		{env, `{"serviceUpdate": {}}`, false},
		{env, `{"activePolicyUpdate": {"id": {"tier": "x"}}}`, false},
		{rule, `{"protocol": {"number": 0}}`, true},
		{rule, `{"protocol": {"number": 6, "name": "tcp"}}`, false},
		{rule, `{"icmpType": 1.0, "notIcmpTypeCode": {"type": "2", "code": 1e0}}`, true},
		{rule, `{"icmpType": 1.5}`, false},
		{rule, `{"metadata": {"annotations": {"a": "1", "a": "2"}}}`, false},
		{rule, `{"metadata": {"annotations": {"a": null}}}`, false},
		{cfg, `{"sourceToRawConfig": {"01": {"source": "x"}, "1": {}}}`, false},
		{cfg, `{"sourceToRawConfig": {"1": {"source": "x"}, "+2": {}}}`, false},
		{cfg, `{"source_to_raw_config": {"4294967295": {"config": {"k": "v"}}}}`, true},
		{status, `{"uptime": "NaN"}`, true},
		{status, `{"uptime": "-Infinity"}`, true},
		{status, `{"uptime": "1e400"}`, false},
		{status, `{"uptime": " 1"}`, false},
		{status, `{"uptime": 1e-400}`, true},
	} {
		assert.Equal(t, tc.ok, sameAsProtojson(t, tc.mt, []byte(tc.data)), "%s", tc.data)
	}
}

// TestUnmarshalJSONErrors: errors name the field path in protojson names.
func TestUnmarshalJSONErrors(t *testing.T) {
	for _, tc := range []struct{ data, want string }{
		{`{"workloadEndpointUpdate": {"endpoint": {"ipv4Net": []}}}`, `workloadEndpointUpdate.endpoint: unknown field "ipv4Net"`},
		{`{"workloadEndpointUpdate": {"endpoint": {"ipv4Nets": ["a", 5]}}}`, `workloadEndpointUpdate.endpoint.ipv4Nets[1]: invalid value for string field ipv4Nets: 5`},
		{`{"workloadEndpointUpdate": {"endpoint": {"tiers": [{}, {"name": 1}]}}}`, `workloadEndpointUpdate.endpoint.tiers[1].name: invalid value for string field name: 1`},
		{`{"workloadEndpointUpdate": {"endpoint": {"annotations": {"a": 1}}}}`, `workloadEndpointUpdate.endpoint.annotations["a"]: invalid value for string field value: 1`},
		{`{"ipsetUpdate": {"type": "nope"}}`, `ipsetUpdate.type: invalid value for enum field type: "nope"`},
		{`{"inSync": {}, "ipsetRemove": {}}`, `error parsing "ipsetRemove", oneof felix.ToDataplane.payload is already set`},
		{`{"inSync": {}, "in_sync": {}}`, `duplicate field "in_sync"`},
		{`{"inSync": []}`, `inSync: unexpected token [`},
	} {
		err := felix.UnmarshalJSON([]byte(tc.data), new(felix.ToDataplane))
		if assert.Error(t, err, tc.data) {
			assert.Equal(t, tc.want, err.Error())
		}
	}
}

// TestReadBytesAsProtojson: felix.proto has no bytes field, so the base64
// reader is checked against protojson's reading of a BytesValue, whose
// JSON form is the bare string.
func TestReadBytesAsProtojson(t *testing.T) {
	for _, s := range []string{`""`, `"AAEC"`, `"AAE="`, `"AAE"`, `"-_8="`, `"-_8"`, `"+/8="`, `"+_8="`, `"A"`, `"AA=A"`, `"AA AA"`, `"AAEC\n"`, `5`, `null`} {
		var want wrapperspb.BytesValue
		wantErr := protojson.Unmarshal([]byte(s), &want)
		got, gotOK := felix.ReadBytesForTest([]byte(s))
		require.Equal(t, wantErr == nil, gotOK, "%s: protojson %v", s, wantErr)
		if gotOK {
			assert.True(t, bytes.Equal(want.GetValue(), got), "%s: %x, want %x", s, got, want.GetValue())
		}
	}
}

// FuzzUnmarshalJSON: for any input and any message type, felix.UnmarshalJSON
// agrees with protojson.Unmarshal.
func FuzzUnmarshalJSON(f *testing.F) {
	types := felixMessages(f)
	r := rand.New(rand.NewPCG(5, 6))
	for i, mt := range types {
		var b bytes.Buffer
		randomJSON(r, &b, mt.Descriptor(), 0)
		f.Add(uint8(i), b.Bytes())
		m := mt.New()
		randomMessage(r, m, 0)
		j, err := protojson.Marshal(m.Interface())
		require.NoError(f, err)
		f.Add(uint8(i), j)
	}
	f.Fuzz(func(t *testing.T, typ uint8, data []byte) {
		sameAsProtojson(t, types[int(typ)%len(types)], data)
	})
}

// TestEqualAsProtoEqual: the generated Equal says what proto.Equal says,
// for random messages of every type, their clones, clones changed in one
// field (deep down too), and unknown fields.
func TestEqualAsProtoEqual(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	equal, unequal := 0, 0
	check := func(a, b proto.Message) {
		t.Helper()
		want := proto.Equal(a, b)
		require.Equal(t, want, felix.Equal(a, b), "%v\n%v", a, b)
		require.Equal(t, want, felix.Equal(b, a), "%v\n%v", b, a)
		if want {
			equal++
		} else {
			unequal++
		}
	}
	for _, mt := range felixMessages(t) {
		for range 100 {
			m := mt.New()
			randomMessage(r, m, 0)
			c := proto.Clone(m.Interface())
			check(m.Interface(), c)
			changeOne(r, c.ProtoReflect(), 0)
			check(m.Interface(), c)
			other := mt.New()
			randomMessage(r, other, 0)
			check(m.Interface(), other.Interface())
			check(mt.New().Interface(), mt.Zero().Interface())

			u := proto.Clone(m.Interface())
			u.ProtoReflect().SetUnknown(protoreflect.RawFields{0xf8, 0x3e, 0x01, 0x80, 0x3f, 0x02}) // fields 999 and 1008
			check(m.Interface(), u)
			v := proto.Clone(m.Interface())
			v.ProtoReflect().SetUnknown(protoreflect.RawFields{0x80, 0x3f, 0x02, 0xf8, 0x3e, 0x01})
			check(u, v)
		}
	}
	t.Logf("%d equal, %d unequal", equal, unequal)
	assert.Greater(t, equal, 1000)
	assert.Greater(t, unequal, 1000)
}

// changeOne changes one field of m, or of a message inside it.
func changeOne(r *rand.Rand, m protoreflect.Message, depth int) {
	fields := m.Descriptor().Fields()
	if fields.Len() == 0 {
		m.SetUnknown(protoreflect.RawFields{0xf8, 0x3e, 0x01})
		return
	}
	fd := fields.Get(r.IntN(fields.Len()))
	switch {
	case fd.IsList():
		l := m.Mutable(fd).List()
		if l.Len() > 0 && fd.Kind() == protoreflect.MessageKind && r.IntN(2) == 0 {
			changeOne(r, l.Get(r.IntN(l.Len())).Message(), depth+1)
		} else if l.Len() > 0 && r.IntN(2) == 0 {
			l.Truncate(l.Len() - 1)
		} else if fd.Kind() == protoreflect.MessageKind {
			l.Append(l.NewElement())
		} else {
			l.Append(randomScalar(r, fd))
		}
	case fd.IsMap():
		mp := m.Mutable(fd).Map()
		k := randomScalar(r, fd.MapKey()).MapKey()
		if fd.MapValue().Kind() == protoreflect.MessageKind {
			mp.Set(k, mp.NewValue())
		} else {
			mp.Set(k, randomScalar(r, fd.MapValue()))
		}
	case fd.Kind() == protoreflect.MessageKind:
		if m.Has(fd) && r.IntN(2) == 0 {
			changeOne(r, m.Mutable(fd).Message(), depth+1)
		} else if m.Has(fd) {
			m.Clear(fd)
		} else {
			m.Set(fd, m.NewField(fd))
		}
	default:
		if r.IntN(4) == 0 {
			m.Clear(fd)
		} else {
			m.Set(fd, randomScalar(r, fd))
		}
	}
}

func TestSkipObject(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want string // the object skipped, "" when there is none
	}{
		{`{}`, `{}`},
		{`  {"a": [1, {"b": "}"}], "c": "\"}"} , 2`, `{"a": [1, {"b": "}"}], "c": "\"}"}`},
		{`{"a": "\\"}x`, `{"a": "\\"}`},
		{`{"a": "x\\\"}"}`, `{"a": "x\\\"}"}`},
		{`[{}]`, ``},
		{`{"a": 1`, ``},
		{`{"a": "}`, ``},
		{``, ``},
	} {
		d := felix.NewJSONDecoder([]byte(tc.in))
		start, end, ok := d.SkipObject()
		got := ""
		if ok {
			got = tc.in[start:end]
			if d.Offset() != end {
				t.Errorf("SkipObject(%q): offset %d, want %d", tc.in, d.Offset(), end)
			}
		}
		if ok != (tc.want != "") || got != tc.want {
			t.Errorf("SkipObject(%q) = %q, %v; want %q", tc.in, got, ok, tc.want)
		}
	}
}
