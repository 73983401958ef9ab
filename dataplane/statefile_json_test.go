package dataplane

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protojson"
	gproto "google.golang.org/protobuf/proto"
	"sigs.k8s.io/yaml"

	"github.com/nftep/nftep/proto"
)

// TestParseStateFileJSONStream: a JSON file is read as a stream; each
// update is what protojson makes of its bytes, which Spans delimit; the
// same file as YAML gives the same updates, with spans in the JSON it
// turns into.
func TestParseStateFileJSONStream(t *testing.T) {
	data := benchStateFile(t, 50)
	sf, err := ParseStateFile("node.json", data)
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"InterfacePrefix": "cali"}, sf.Config)
	require.Len(t, sf.Updates, 251)
	require.Len(t, sf.Spans, len(sf.Updates))
	for i, sp := range sf.Spans {
		raw := data[sp[0]:sp[1]]
		require.True(t, raw[0] == '{' && raw[len(raw)-1] == '}', "span %d: %q", i, raw)
		want := new(proto.ToDataplane)
		require.NoError(t, protojson.Unmarshal(raw, want))
		require.True(t, gproto.Equal(want, sf.Updates[i]), "update %d", i)
	}

	ym, err := yaml.JSONToYAML(data)
	require.NoError(t, err)
	sfy, err := ParseStateFile("node.yaml", ym)
	require.NoError(t, err)
	require.Len(t, sfy.Updates, len(sf.Updates))
	require.Len(t, sfy.Spans, len(sfy.Updates))
	for i := range sf.Updates {
		require.True(t, gproto.Equal(sf.Updates[i], sfy.Updates[i]), "update %d", i)
		got := new(proto.ToDataplane)
		sp := sfy.Spans[i]
		require.NoError(t, protojson.Unmarshal(sfy.JSON[sp[0]:sp[1]], got), "update %d", i)
		require.True(t, gproto.Equal(sf.Updates[i], got), "update %d from its span", i)
	}
}

// TestParseStateFileJSONShapes: what a JSON file may and may not be, and
// JSON that is not JSON after all going the YAML way.
func TestParseStateFileJSONShapes(t *testing.T) {
	for _, tc := range []struct {
		name, file string
		updates    int
		config     map[string]string
		err        string
	}{
		{name: "empty object", file: `{}`, config: map[string]string{}},
		{name: "nulls", file: `{"config": null, "updates": null}`, config: map[string]string{}},
		{name: "config scalars", file: `{"config": {"A": "x", "B": 4789, "C": true, "D": null, "E": 1.5e3}}`,
			config: map[string]string{"A": "x", "B": "4789", "C": "true", "D": "", "E": "1.5e3"}},
		{name: "snake and camel", file: `{"updates": [{"in_sync": {}}, {"ipsetRemove": {"id": "s"}}]}`, updates: 2, config: map[string]string{}},
		{name: "white space", file: " \n{ \"updates\" : [ {\"inSync\":{}} ,\n {} ] }\n ", updates: 2, config: map[string]string{}},
		// Not JSON: YAML reads it (flow style, unquoted keys).
		{name: "yaml flow style", file: `{updates: [{inSync: {}}], config: {A: b}}`, updates: 1, config: map[string]string{"A": "b"}},
		{name: "trailing comma is YAML", file: `{"updates": [{"inSync": {}}],}`, updates: 1, config: map[string]string{}},
		{name: "unknown key", file: `{"update": []}`, err: `state file "f": update: unknown key (want config and updates)`},
		{name: "twice", file: `{"updates": [], "updates": []}`, err: `state file "f": updates: given twice`},
		{name: "updates not a list", file: `{"updates": {"a": 1}}`, err: `state file "f": updates: want a list of Felix messages`},
		{name: "config not a map", file: `{"config": [1]}`, err: `state file "f": config: want a map of Felix settings`},
		{name: "config list value", file: `{"config": {"Foo": [1]}}`, err: `state file "f": config: Foo: want a string, number or boolean, not a list`},
		{name: "config map value", file: `{"config": {"Foo": {}}}`, err: `state file "f": config: Foo: want a string, number or boolean, not a map`},
		{name: "update not an object", file: `{"updates": [5]}`, err: `state file "f": updates[0]: unexpected token 5`},
		{name: "unknown field with id after it", file: `{"updates": [{"workloadEndpointUpdate": {"endpoint": {"ipv4Net": []}, "id": {"orchestratorId": "k8s", "workloadId": "ns/a", "endpointId": "eth0"}}}]}`,
			err: `state file "f": updates[0] (workloadEndpointUpdate k8s/ns/a/eth0): endpoint: unknown field "ipv4Net"`},
		{name: "bad value", file: `{"updates": [{}, {"activePolicyUpdate": {"id": {"name": "p"}, "policy": {"inboundRules": [{}, {"dstPorts": [{"first": "x"}]}]}}}]}`,
			err: `state file "f": updates[1] (activePolicyUpdate p): policy.inboundRules[1].dstPorts[0].first: invalid value for int32 field first: "x"`},
		{name: "bad enum", file: `{"updates": [{"ipset_update": {"id": "s", "type": "CIDR"}}]}`,
			err: `state file "f": updates[0] (ipsetUpdate s): type: invalid value for enum field type: "CIDR"`},
		{name: "two payloads", file: `{"updates": [{"inSync": {}, "ipsetRemove": {"id": "s"}}]}`,
			err: `state file "f": updates[0]: error parsing "ipsetRemove", oneof felix.ToDataplane.payload is already set`},
		{name: "envelope field", file: `{"updates": [{"sequenceNumber": -1}]}`,
			err: `state file "f": updates[0]: sequenceNumber: invalid value for uint64 field sequenceNumber: -1`},
		{name: "not YAML either", file: `{"updates": [{"inSync": {}]}`, err: `state file "f": yaml:`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sf, err := ParseStateFile("f", []byte(tc.file))
			if tc.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.err)
				var sfe *StateFileError
				assert.ErrorAs(t, err, &sfe)
				return
			}
			require.NoError(t, err)
			assert.Len(t, sf.Updates, tc.updates)
			assert.Equal(t, tc.config, sf.Config)
		})
	}
}

// TestParseStateFileLarge: LoadStateFile's limit still holds.
func TestParseStateFileLarge(t *testing.T) {
	path := t.TempDir() + "/big.json"
	f, err := os.Create(path)
	require.NoError(t, err)
	require.NoError(t, f.Truncate(MaxStateFileSize+1))
	require.NoError(t, f.Close())
	_, err = LoadStateFile(path)
	require.Error(t, err)
	assert.True(t, strings.Contains(err.Error(), "MiB a state file may hold"), err.Error())
}
