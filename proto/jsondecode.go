package proto

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// JSONDecoder reads Felix's messages in protojson's JSON form from one
// byte slice, token by token, without reflection: felix_json.go, generated
// from felix.proto by internal/genjson, has one decode function per message
// type over this tokenizer.
//
// It accepts exactly what protojson.Unmarshal accepts for these messages
// (fuzz_test.go checks it): a field by its lowerCamelCase JSON name or its
// proto name, each field at most once, null for "not set", enums by name
// or number, integers as numbers or strings holding one, 64-bit ones too,
// doubles also as "NaN", "Infinity" and "-Infinity", bytes as base64 (standard or URL
// alphabet, padded or not), one member of a oneof, maps with each key once.
// An unknown field is an error naming it. protojson's lexical rules hold
// too: strings must be valid UTF-8 with valid escapes, and a number's
// exponent may have no digits ("1e" is the integer 1).
//
// The exported token methods (ObjectStart, NextKey, ArrayStart, ArrayNext,
// IsNull, ReadScalar, End) let a caller walk a document around the
// messages, such as a state file's `updates` list.
type JSONDecoder struct {
	data []byte
	pos  int
	// keyStart and keyEnd delimit the last object key read, quotes
	// included (for error messages).
	keyStart, keyEnd int
	// valStart is where the last scalar value read started.
	valStart int
	// lexErr is the syntax error the last scalar read ran into, if any.
	lexErr *JSONError
	// scratch holds a key or string that needed unescaping.
	scratch []byte
}

// NewJSONDecoder returns a decoder of data.
func NewJSONDecoder(data []byte) *JSONDecoder {
	return &JSONDecoder{data: data}
}

// JSONError is a problem found at one place of a JSON document.
type JSONError struct {
	// Offset is the byte offset in the decoder's data.
	Offset int
	// Path is the field path of the problem inside the message being
	// decoded, in protojson names ("endpoint.ipv4Nets[1]"); empty for the
	// message itself.
	Path string
	// Msg says what is wrong.
	Msg string
	// Syntax is set when the data is not JSON at all (as opposed to JSON
	// that is not the message).
	Syntax bool
}

// Error implements error.
func (e *JSONError) Error() string {
	if e.Path == "" {
		return e.Msg
	}
	return e.Path + ": " + e.Msg
}

// Offset returns the offset in the data of the next byte to read. After
// ArrayNext returned more, it is where the element starts; after a value
// was read, right behind its last byte.
func (d *JSONDecoder) Offset() int {
	return d.pos
}

// End checks that nothing but white space follows.
func (d *JSONDecoder) End() error {
	d.ws()
	if d.pos < len(d.data) {
		return d.unexpected()
	}
	return nil
}

// wrapField puts the field name in front of err's path.
func wrapField(err error, name string) error {
	if e, ok := err.(*JSONError); ok {
		switch {
		case e.Path == "":
			e.Path = name
		case e.Path[0] == '[':
			e.Path = name + e.Path
		default:
			e.Path = name + "." + e.Path
		}
	}
	return err
}

// wrapIndex puts "name[i]" in front of err's path.
func wrapIndex(err error, name string, i int) error {
	return wrapField(err, name+"["+strconv.Itoa(i)+"]")
}

// wrapKey puts `name["key"]` in front of err's path.
func wrapKey(err error, name string, key string) error {
	return wrapField(err, name+"["+strconv.Quote(key)+"]")
}

// ws skips white space (JSON's four characters only).
func (d *JSONDecoder) ws() {
	for d.pos < len(d.data) {
		switch d.data[d.pos] {
		case ' ', '\n', '\r', '\t':
			d.pos++
		default:
			return
		}
	}
}

func (d *JSONDecoder) syntaxErr(off int, format string, args ...any) *JSONError {
	return &JSONError{Offset: off, Msg: fmt.Sprintf(format, args...), Syntax: true}
}

func (d *JSONDecoder) eofErr() *JSONError {
	return &JSONError{Offset: len(d.data), Msg: "unexpected EOF", Syntax: true}
}

// isNotDelim says whether c may continue a literal or a number: a literal
// or number followed by one of these is not a token.
func isNotDelim(c byte) bool {
	return c == '-' || c == '+' || c == '.' || c == '_' ||
		('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') || ('0' <= c && c <= '9')
}

// literalAt says whether the literal lit starts at off and ends there.
func (d *JSONDecoder) literalAt(off int, lit string) bool {
	end := off + len(lit)
	if end > len(d.data) || string(d.data[off:end]) != lit {
		return false
	}
	return end == len(d.data) || !isNotDelim(d.data[end])
}

// numberLen returns the length of the JSON number at the start of s, or 0
// when s does not start with one. As protojson's lexer, it takes an
// exponent marker without digits ("1e", "1e+") when a delimiter follows.
func numberLen(s []byte) int {
	n := 0
	if n < len(s) && s[n] == '-' {
		n++
	}
	switch {
	case n < len(s) && s[n] == '0':
		n++
	case n < len(s) && '1' <= s[n] && s[n] <= '9':
		n++
		for n < len(s) && '0' <= s[n] && s[n] <= '9' {
			n++
		}
	default:
		return 0
	}
	if n+1 < len(s) && s[n] == '.' && '0' <= s[n+1] && s[n+1] <= '9' {
		n += 2
		for n < len(s) && '0' <= s[n] && s[n] <= '9' {
			n++
		}
	}
	if n+1 < len(s) && (s[n] == 'e' || s[n] == 'E') {
		n++
		if s[n] == '+' || s[n] == '-' {
			n++
			if n == len(s) {
				return 0
			}
		}
		for n < len(s) && '0' <= s[n] && s[n] <= '9' {
			n++
		}
	}
	if n < len(s) && isNotDelim(s[n]) {
		return 0
	}
	return n
}

// lexAt returns the end of the token at off (white space skipped
// already), or a syntax error when there is none. Used for messages.
func (d *JSONDecoder) lexAt(off int) (int, *JSONError) {
	if off >= len(d.data) {
		return off, d.eofErr()
	}
	switch c := d.data[off]; c {
	case '{', '}', '[', ']', ',':
		return off + 1, nil
	case '"':
		save := d.pos
		d.pos = off
		_, err := d.strBytes()
		end := d.pos
		d.pos = save
		return end, err
	case 'n':
		if d.literalAt(off, "null") {
			return off + 4, nil
		}
	case 't':
		if d.literalAt(off, "true") {
			return off + 4, nil
		}
	case 'f':
		if d.literalAt(off, "false") {
			return off + 5, nil
		}
	default:
		if c == '-' || ('0' <= c && c <= '9') {
			if n := numberLen(d.data[off:]); n > 0 {
				return off + n, nil
			}
		}
	}
	return off, d.syntaxErr(off, "invalid value %s", invalidText(d.data[off:]))
}

// invalidText is what an error shows of input that is no token: a run
// of name-like characters, or one character.
func invalidText(b []byte) string {
	n := 0
	for n < len(b) && n < 32 && isNotDelim(b[n]) {
		n++
	}
	if n == 0 {
		_, n = utf8.DecodeRune(b)
	}
	return string(b[:n])
}

// isValueStart says whether the token at off may start a JSON value.
func (d *JSONDecoder) isValueStart(off int, end int) bool {
	switch d.data[off] {
	case '}', ']', ',':
		return false
	}
	return end > off
}

// unexpected is the error for the token at d.pos where it does not
// belong. It is a syntax error unless the token starts a JSON value (the
// document may be JSON, only not the message).
func (d *JSONDecoder) unexpected() error {
	d.ws()
	end, err := d.lexAt(d.pos)
	if err != nil {
		return err
	}
	return &JSONError{Offset: d.pos, Msg: "unexpected token " + string(d.data[d.pos:end]), Syntax: !d.isValueStart(d.pos, end)}
}

// ObjectStart reads the '{' of an object.
func (d *JSONDecoder) ObjectStart() error {
	d.ws()
	if d.pos < len(d.data) && d.data[d.pos] == '{' {
		d.pos++
		return nil
	}
	return d.unexpected()
}

// ArrayStart reads the '[' of an array.
func (d *JSONDecoder) ArrayStart() error {
	d.ws()
	if d.pos < len(d.data) && d.data[d.pos] == '[' {
		d.pos++
		return nil
	}
	return d.unexpected()
}

// NextKey reads the next key of an object and its ':', or the '}' that
// ends it (then more is false). first says whether this is the first call
// for the object. The key may point into the decoder's scratch space: it
// is valid until the next read.
func (d *JSONDecoder) NextKey(first bool) (key []byte, more bool, err error) {
	d.ws()
	if d.pos >= len(d.data) {
		return nil, false, d.eofErr()
	}
	c := d.data[d.pos]
	if c == '}' {
		d.pos++
		return nil, false, nil
	}
	if !first {
		if c != ',' {
			return nil, false, d.syntaxErr(d.pos, "unexpected token %s", d.tokenText(d.pos))
		}
		d.pos++
		d.ws()
		if d.pos >= len(d.data) {
			return nil, false, d.eofErr()
		}
		c = d.data[d.pos]
	}
	if c != '"' {
		return nil, false, d.syntaxErr(d.pos, "unexpected token %s", d.tokenText(d.pos))
	}
	d.keyStart = d.pos
	key, lerr := d.strBytes()
	if lerr != nil {
		return nil, false, lerr
	}
	d.keyEnd = d.pos
	d.ws()
	if d.pos >= len(d.data) {
		return nil, false, d.eofErr()
	}
	if d.data[d.pos] != ':' {
		return nil, false, d.syntaxErr(d.pos, "unexpected character %s, missing \":\" after field name", invalidText(d.data[d.pos:]))
	}
	d.pos++
	return key, true, nil
}

// tokenText is the token at off for a message, or what is there.
func (d *JSONDecoder) tokenText(off int) string {
	end, err := d.lexAt(off)
	if err != nil {
		if off >= len(d.data) {
			return "EOF"
		}
		return invalidText(d.data[off:])
	}
	return string(d.data[off:end])
}

// ArrayNext reads the ',' before the next element of an array, or the ']'
// that ends it (then more is false). first says whether this is the first
// call for the array.
func (d *JSONDecoder) ArrayNext(first bool) (more bool, err error) {
	d.ws()
	if d.pos >= len(d.data) {
		return false, d.eofErr()
	}
	c := d.data[d.pos]
	if c == ']' {
		if !first {
			d.pos++
			return false, nil
		}
		d.pos++
		return false, nil
	}
	if first {
		return true, nil
	}
	if c != ',' {
		return false, d.syntaxErr(d.pos, "unexpected token %s", d.tokenText(d.pos))
	}
	d.pos++
	d.ws()
	if d.pos < len(d.data) && d.data[d.pos] == ']' {
		return false, d.syntaxErr(d.pos, "unexpected token ]")
	}
	return true, nil
}

// IsNull reads a null if one is next.
func (d *JSONDecoder) IsNull() bool {
	d.ws()
	if d.pos < len(d.data) && d.data[d.pos] == 'n' && d.literalAt(d.pos, "null") {
		d.pos += 4
		return true
	}
	return false
}

// ScalarKind is the kind of a JSON value ReadScalar read.
type ScalarKind int

// The kinds of JSON values.
const (
	ScalarNull ScalarKind = iota
	ScalarBool
	ScalarNumber
	ScalarString
	ScalarObject
	ScalarArray
)

// ReadScalar reads a null, boolean, number or string and returns its kind
// and text (a string's content, a number's or boolean's literal). For an
// object or array it reads nothing and returns ScalarObject or
// ScalarArray.
func (d *JSONDecoder) ReadScalar() (ScalarKind, string, error) {
	d.ws()
	if d.pos >= len(d.data) {
		return 0, "", d.eofErr()
	}
	switch c := d.data[d.pos]; {
	case c == '{':
		return ScalarObject, "", nil
	case c == '[':
		return ScalarArray, "", nil
	case c == '"':
		b, err := d.strBytes()
		if err != nil {
			return 0, "", err
		}
		return ScalarString, string(b), nil
	case c == 'n' && d.literalAt(d.pos, "null"):
		d.pos += 4
		return ScalarNull, "", nil
	case c == 't' && d.literalAt(d.pos, "true"):
		d.pos += 4
		return ScalarBool, "true", nil
	case c == 'f' && d.literalAt(d.pos, "false"):
		d.pos += 5
		return ScalarBool, "false", nil
	case c == '-' || ('0' <= c && c <= '9'):
		if n := numberLen(d.data[d.pos:]); n > 0 {
			s := string(d.data[d.pos : d.pos+n])
			d.pos += n
			return ScalarNumber, s, nil
		}
	}
	return 0, "", d.unexpected()
}

// strPlain marks the bytes a string may hold without a closer look.
var strPlain = func() (t [256]bool) {
	for c := 0x20; c < 0x80; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// strBytes reads the string at d.pos (its '"') and returns its content,
// which points into the data or into the scratch space.
func (d *JSONDecoder) strBytes() ([]byte, *JSONError) {
	start := d.pos + 1
	i := start
	data := d.data
	for i < len(data) && strPlain[data[i]] {
		i++
	}
	if i < len(data) && data[i] == '"' {
		d.pos = i + 1
		return data[start:i], nil
	}
	return d.strSlow(start, i)
}

// strSlow reads a string that has escapes, non-ASCII or invalid bytes
// from i on (start is where its content starts).
func (d *JSONDecoder) strSlow(start, i int) ([]byte, *JSONError) {
	data := d.data
	out := d.scratch[:0]
	copied := false // out holds data[start:i] and what followed, unescaped
	for i < len(data) {
		c := data[i]
		switch {
		case c == '"':
			d.pos = i + 1
			if !copied {
				return data[start:i], nil
			}
			d.scratch = out
			return out, nil
		case c == '\\':
			if !copied {
				out = append(out, data[start:i]...)
				copied = true
			}
			if i+1 >= len(data) {
				return nil, d.eofErr()
			}
			switch e := data[i+1]; e {
			case '"', '\\', '/':
				out = append(out, e)
			case 'b':
				out = append(out, '\b')
			case 'f':
				out = append(out, '\f')
			case 'n':
				out = append(out, '\n')
			case 'r':
				out = append(out, '\r')
			case 't':
				out = append(out, '\t')
			case 'u':
				if i+6 > len(data) {
					return nil, d.eofErr()
				}
				r, ok := hex4(data[i+2 : i+6])
				if !ok {
					return nil, d.syntaxErr(i, "invalid escape code %q in string", data[i:i+6])
				}
				i += 6
				if utf16.IsSurrogate(r) {
					if i+6 > len(data) {
						return nil, d.eofErr()
					}
					r2, ok := hex4(data[i+2 : i+6])
					r = utf16.DecodeRune(r, r2)
					if data[i] != '\\' || data[i+1] != 'u' || !ok || r == utf8.RuneError {
						return nil, d.syntaxErr(i, "invalid escape code %q in string", data[i:i+6])
					}
					i += 6
				}
				out = utf8.AppendRune(out, r)
				continue
			default:
				return nil, d.syntaxErr(i, "invalid escape code %q in string", data[i:i+2])
			}
			i += 2
		case c < 0x20:
			return nil, d.syntaxErr(i, "invalid character %q in string", rune(c))
		case c < 0x80:
			if copied {
				out = append(out, c)
			}
			i++
		default:
			r, n := utf8.DecodeRune(data[i:])
			if r == utf8.RuneError && n == 1 {
				return nil, d.syntaxErr(i, "invalid UTF-8 in string")
			}
			if copied {
				out = append(out, data[i:i+n]...)
			}
			i += n
		}
	}
	return nil, d.eofErr()
}

// hex4 reads four hex digits.
func hex4(b []byte) (rune, bool) {
	var r rune
	for _, c := range b {
		switch {
		case '0' <= c && c <= '9':
			r = r<<4 | rune(c-'0')
		case 'a' <= c && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case 'A' <= c && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

// The scalar readers below return ok false when the value is not one of
// their type; badValue then makes the error.

// startValue skips white space and notes where a value starts.
func (d *JSONDecoder) startValue() bool {
	d.ws()
	d.valStart = d.pos
	d.lexErr = nil
	return d.pos < len(d.data)
}

// badValue is the error for the scalar at d.valStart that did not read.
func (d *JSONDecoder) badValue(kind, field string) error {
	if d.lexErr != nil {
		err := d.lexErr
		d.lexErr = nil
		return err
	}
	end, err := d.lexAt(d.valStart)
	if err != nil {
		return err
	}
	return &JSONError{Offset: d.valStart, Msg: fmt.Sprintf("invalid value for %s field %s: %s", kind, field, d.data[d.valStart:end]),
		Syntax: !d.isValueStart(d.valStart, end)}
}

// strValue reads a string's content, for the readers of numbers in strings.
func (d *JSONDecoder) strValue() ([]byte, bool) {
	b, err := d.strBytes()
	if err != nil {
		d.lexErr = err
		return nil, false
	}
	return b, true
}

func (d *JSONDecoder) readString() (string, bool) {
	if !d.startValue() || d.data[d.pos] != '"' {
		return "", false
	}
	b, ok := d.strValue()
	return string(b), ok
}

func (d *JSONDecoder) readBool() (bool, bool) {
	if !d.startValue() {
		return false, false
	}
	switch {
	case d.literalAt(d.pos, "true"):
		d.pos += 4
		return true, true
	case d.literalAt(d.pos, "false"):
		d.pos += 5
		return false, true
	}
	return false, false
}

// numberToken reads the number at d.pos, or the one a string holds (with
// nothing around it), as protojson reads integers and doubles.
func (d *JSONDecoder) numberToken() ([]byte, bool) {
	c := d.data[d.pos]
	if c == '"' {
		b, ok := d.strValue()
		if !ok || len(bytes.TrimSpace(b)) != len(b) || numberLen(b) != len(b) || len(b) == 0 {
			return nil, false
		}
		return b, true
	}
	if c == '-' || ('0' <= c && c <= '9') {
		n := numberLen(d.data[d.pos:])
		if n == 0 {
			return nil, false
		}
		b := d.data[d.pos : d.pos+n]
		d.pos += n
		return b, true
	}
	return nil, false
}

func (d *JSONDecoder) readInt(bits int) (int64, bool) {
	if !d.startValue() {
		return 0, false
	}
	b, ok := d.numberToken()
	if !ok {
		return 0, false
	}
	return parseInt(b, bits)
}

func (d *JSONDecoder) readUint(bits int) (uint64, bool) {
	if !d.startValue() {
		return 0, false
	}
	b, ok := d.numberToken()
	if !ok {
		return 0, false
	}
	return parseUint(b, bits)
}

// plainDigits reads s as a decimal of at most 18 digits with no leading
// zero, the common case.
func plainDigits(s []byte) (uint64, bool) {
	if len(s) == 0 || len(s) > 18 || (s[0] == '0' && len(s) > 1) {
		return 0, false
	}
	var n uint64
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + uint64(c-'0')
	}
	return n, true
}

// parseInt reads the JSON number b as an integer of bits bits, as
// protojson does: 1.0 and 1e2 are integers, 1.5 is not.
func parseInt(b []byte, bits int) (int64, bool) {
	neg := len(b) > 0 && b[0] == '-'
	digits := b
	if neg {
		digits = b[1:]
	}
	if u, ok := plainDigits(digits); ok {
		v := int64(u)
		if neg {
			v = -v
		}
		if bits == 32 && (v < math.MinInt32 || v > math.MaxInt32) {
			return 0, false
		}
		return v, true
	}
	s, ok := intString(b)
	if !ok {
		return 0, false
	}
	v, err := strconv.ParseInt(s, 10, bits)
	return v, err == nil
}

// parseUint is parseInt for unsigned integers.
func parseUint(b []byte, bits int) (uint64, bool) {
	if u, ok := plainDigits(b); ok {
		if bits == 32 && u > math.MaxUint32 {
			return 0, false
		}
		return u, true
	}
	s, ok := intString(b)
	if !ok {
		return 0, false
	}
	v, err := strconv.ParseUint(s, 10, bits)
	return v, err == nil
}

// intString rewrites a JSON number as a plain integer ("1.5e1" is "15"),
// or returns false when it is no integer. A zero loses its sign ("-0.0" is
// "0") unless it is written "-0", which stays as it is.
func intString(b []byte) (string, bool) {
	neg := false
	if len(b) > 0 && b[0] == '-' {
		neg = true
		b = b[1:]
	}
	var intp, frac, exp []byte
	i := 0
	if i < len(b) && b[i] == '0' {
		i++
	} else {
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
		intp = b[:i]
	}
	if i+1 < len(b) && b[i] == '.' {
		j := i + 1
		for j < len(b) && '0' <= b[j] && b[j] <= '9' {
			j++
		}
		frac = bytes.TrimRight(b[i+1:j], "0")
		i = j
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		exp = b[i+1:]
	}
	if len(intp) == 0 && len(frac) == 0 {
		return "0", true
	}
	e := 0
	if len(exp) > 0 {
		v, err := strconv.ParseInt(string(exp), 10, 32)
		if err != nil {
			return "", false
		}
		e = int(v)
	}
	var num []byte
	if e >= 0 {
		if len(frac) > e || len(intp)+e > 20 {
			return "", false
		}
		num = append(num, intp...)
		num = append(num, frac...)
		for range e - len(frac) {
			num = append(num, '0')
		}
	} else {
		if len(frac) > 0 {
			return "", false
		}
		at := len(intp) + e
		if at < 0 {
			return "", false
		}
		for _, c := range intp[at:] {
			if c != '0' {
				return "", false
			}
		}
		num = intp[:at]
	}
	if neg {
		return "-" + string(num), true
	}
	return string(num), true
}

func (d *JSONDecoder) readFloat(bits int) (float64, bool) {
	if !d.startValue() {
		return 0, false
	}
	if d.data[d.pos] == '"' {
		b, ok := d.strValue()
		if !ok {
			return 0, false
		}
		switch string(b) {
		case "NaN":
			return math.NaN(), true
		case "Infinity":
			return math.Inf(1), true
		case "-Infinity":
			return math.Inf(-1), true
		}
		if len(bytes.TrimSpace(b)) != len(b) || len(b) == 0 || numberLen(b) != len(b) {
			return 0, false
		}
		f, err := strconv.ParseFloat(string(b), bits)
		return f, err == nil
	}
	b, ok := d.numberToken()
	if !ok {
		return 0, false
	}
	f, err := strconv.ParseFloat(string(b), bits)
	return f, err == nil
}

func (d *JSONDecoder) readBytes() ([]byte, bool) {
	if !d.startValue() || d.data[d.pos] != '"' {
		return nil, false
	}
	b, ok := d.strValue()
	if !ok {
		return nil, false
	}
	s := string(b)
	enc := base64.StdEncoding
	if strings.ContainsAny(s, "-_") {
		enc = base64.URLEncoding
	}
	if len(s)%4 != 0 {
		enc = enc.WithPadding(base64.NoPadding)
	}
	v, err := enc.DecodeString(s)
	if err != nil {
		return nil, false
	}
	return v, true
}

// readEnum reads an enum value: a name lookup knows, or a number.
func (d *JSONDecoder) readEnum(lookup func([]byte) (int32, bool)) (int32, bool) {
	if !d.startValue() {
		return 0, false
	}
	c := d.data[d.pos]
	if c == '"' {
		b, ok := d.strValue()
		if !ok {
			return 0, false
		}
		return lookup(b)
	}
	if c == '-' || ('0' <= c && c <= '9') {
		n := numberLen(d.data[d.pos:])
		if n == 0 {
			return 0, false
		}
		b := d.data[d.pos : d.pos+n]
		d.pos += n
		v, ok := parseInt(b, 32)
		return int32(v), ok
	}
	return 0, false
}

// unknownField is the error for the key just read.
func (d *JSONDecoder) unknownField() error {
	return &JSONError{Offset: d.keyStart, Msg: "unknown field " + string(d.data[d.keyStart:d.keyEnd])}
}

// duplicateField is the error for a field given twice.
func (d *JSONDecoder) duplicateField() error {
	return &JSONError{Offset: d.keyStart, Msg: "duplicate field " + string(d.data[d.keyStart:d.keyEnd])}
}

// duplicateKey is the error for a map key given twice.
func (d *JSONDecoder) duplicateKey() error {
	return &JSONError{Offset: d.keyStart, Msg: "duplicate map key " + string(d.data[d.keyStart:d.keyEnd])}
}

// badKey is the error for a map key that is not of the key type.
func (d *JSONDecoder) badKey(kind string) error {
	return &JSONError{Offset: d.keyStart, Msg: fmt.Sprintf("invalid value for %s key: %s", kind, d.data[d.keyStart:d.keyEnd])}
}

// oneofSet is the error for a second member of a oneof.
func (d *JSONDecoder) oneofSet(oneof string) error {
	return &JSONError{Offset: d.keyStart, Msg: fmt.Sprintf("error parsing %s, oneof %s is already set", d.data[d.keyStart:d.keyEnd], oneof)}
}

// Map keys, as protojson reads them.

func keyInt(b []byte, bits int) (int64, bool) {
	v, err := strconv.ParseInt(string(b), 10, bits)
	return v, err == nil
}

func keyUint(b []byte, bits int) (uint64, bool) {
	v, err := strconv.ParseUint(string(b), 10, bits)
	return v, err == nil
}

func keyBool(b []byte) (bool, bool) {
	switch string(b) {
	case "true":
		return true, true
	case "false":
		return false, true
	}
	return false, false
}

// equalFloat is == for floating-point fields, except that a NaN equals a
// NaN, as in proto.Equal.
func equalFloat(x, y float64) bool {
	if math.IsNaN(x) || math.IsNaN(y) {
		return math.IsNaN(x) && math.IsNaN(y)
	}
	return x == y
}

// SkipObject reads past the object that starts at the next token and
// returns where it starts and ends (data[start:end] is the object). It
// looks only at the structure: braces and brackets outside strings, and
// strings' quotes and escapes. It does not check that the object is valid
// JSON inside, which is what makes it several times faster than Decode: it
// is for bytes the caller knows (by their digest) it decoded before. Bytes
// it does not know it decodes with a decoder of data[start:end]. ok is
// false when no object starts next, or it does not end.
func (d *JSONDecoder) SkipObject() (start, end int, ok bool) {
	d.ws()
	start = d.pos
	if start >= len(d.data) || d.data[start] != '{' {
		return start, start, false
	}
	depth := 0
	for i := start; i < len(d.data); i++ {
		switch d.data[i] {
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth == 0 {
				d.pos = i + 1
				return start, d.pos, true
			}
		case '"':
			// To the closing quote: the next one behind an even number
			// of backslashes (IndexByte is vectorised; escapes are rare).
			for {
				j := bytes.IndexByte(d.data[i+1:], '"')
				if j < 0 {
					return start, start, false
				}
				i += 1 + j
				k := i - 1
				for k > start && d.data[k] == '\\' {
					k--
				}
				if (i-1-k)%2 == 0 {
					break
				}
			}
		}
	}
	return start, start, false
}
