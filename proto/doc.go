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
//
// State files hold the messages in protojson's JSON form. JSONDecoder reads
// that form without reflection: felix_json.go, generated from felix.proto by
// internal/genjson, has one decode function per message over a tokenizer of
// protojson's lexical rules, and accepts exactly what protojson.Unmarshal
// accepts (jsondecode_test.go holds it to that). felix_equal.go, from the
// same generator, has an Equal method per message that says what
// proto.Equal says. `go generate ./proto` runs protoc, then the generator.
package proto

//go:generate ./gen.sh
//go:generate go run ./internal/genjson -o felix_json.go -equal felix_equal.go
