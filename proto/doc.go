// Package proto holds Felix's wire vocabulary and the pipe framing nftep uses to
// talk to a real Calico Felix as its external dataplane driver.
//
// The message types (ToDataplane, FromDataplane and everything they carry) are
// generated from felix.proto, which has Felix's message names, field names and
// field numbers, so that the same types decode the Felix pipe (binary protobuf)
// and nftep's state files (protojson). Payloads nftep does not use are reserved
// in felix.proto: such a ToDataplane decodes with no payload set, its content
// kept as unknown fields, and a consumer skips it.
//
// On the pipe every message is one frame: an 8-byte little-endian unsigned
// length, then that many bytes of one envelope (ToDataplane from Felix on fd 3,
// FromDataplane to Felix on fd 4). Reader and Writer implement that framing,
// as Felix's RecvMessage and SendMessage do
// (felix/dataplane/external/ext_dataplane.go; Felix documents the format in
// felix/proto/doc.go).
package proto

//go:generate ./gen.sh
//go:generate go run ./internal/genjson -o felix_json.go -equal felix_equal.go
