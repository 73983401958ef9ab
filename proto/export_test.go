package proto

// ReadBytesForTest reads b, one JSON value, as a bytes field.
func ReadBytesForTest(b []byte) ([]byte, bool) {
	d := NewJSONDecoder(b)
	v, ok := d.readBytes()
	if !ok || d.End() != nil {
		return nil, false
	}
	return v, true
}
