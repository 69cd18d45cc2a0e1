package secrets_test

import (
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"
)

// A schema the real spec does not have (yet): secrets nested in messages,
// in repeated fields, in maps of messages, of every kind, and in a response.
// It stands in for future spec versions and vendor extensions.
//
//	message Inner {
//	  string token = 1 [(csi.v1.csi_secret) = true];
//	  string name = 2;
//	  map<string, string> secrets = 3 [(csi.v1.csi_secret) = true];
//	}
//	message FutureResponse {
//	  string plain = 1;
//	  Inner inner = 2;
//	  repeated Inner items = 3;
//	  map<string, Inner> by_name = 4;
//	  repeated string tokens = 5 [(csi.v1.csi_secret) = true];
//	  bytes key = 6 [(csi.v1.csi_secret) = true];
//	  Inner secret_inner = 7 [(csi.v1.csi_secret) = true];
//	  int64 pin = 8 [(csi.v1.csi_secret) = true];
//	  map<string, string> secrets = 9;  // no option: caught by its name
//	  map<string, string> labels = 10;  // not secret
//	  map<string, bytes> blobs = 11 [(csi.v1.csi_secret) = true];
//	}
func futureSchema(t testing.TB) (inner, outer protoreflect.MessageDescriptor) {
	t.Helper()
	secret := func() *descriptorpb.FieldOptions {
		o := &descriptorpb.FieldOptions{}
		proto.SetExtension(o, csi.E_CsiSecret, true)
		return o
	}
	opt := descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum()
	rep := descriptorpb.FieldDescriptorProto_LABEL_REPEATED.Enum()
	str := descriptorpb.FieldDescriptorProto_TYPE_STRING.Enum()
	byt := descriptorpb.FieldDescriptorProto_TYPE_BYTES.Enum()
	msg := descriptorpb.FieldDescriptorProto_TYPE_MESSAGE.Enum()
	i64 := descriptorpb.FieldDescriptorProto_TYPE_INT64.Enum()
	field := func(name string, num int32, label *descriptorpb.FieldDescriptorProto_Label,
		typ *descriptorpb.FieldDescriptorProto_Type, typeName string, o *descriptorpb.FieldOptions) *descriptorpb.FieldDescriptorProto {
		f := &descriptorpb.FieldDescriptorProto{Name: proto.String(name), Number: proto.Int32(num),
			Label: label, Type: typ, JsonName: proto.String(name), Options: o}
		if typeName != "" {
			f.TypeName = proto.String(typeName)
		}
		return f
	}
	entry := func(name string, vt *descriptorpb.FieldDescriptorProto_Type, vtn string) *descriptorpb.DescriptorProto {
		return &descriptorpb.DescriptorProto{
			Name: proto.String(name),
			Field: []*descriptorpb.FieldDescriptorProto{
				field("key", 1, opt, str, "", nil),
				field("value", 2, opt, vt, vtn, nil),
			},
			Options: &descriptorpb.MessageOptions{MapEntry: proto.Bool(true)},
		}
	}
	fdp := &descriptorpb.FileDescriptorProto{
		Name:       proto.String("csikit/secrets_test/future.proto"),
		Package:    proto.String("csikit.secretstest"),
		Syntax:     proto.String("proto3"),
		Dependency: []string{"csi.proto"},
		MessageType: []*descriptorpb.DescriptorProto{
			{
				Name: proto.String("Inner"),
				Field: []*descriptorpb.FieldDescriptorProto{
					field("token", 1, opt, str, "", secret()),
					field("name", 2, opt, str, "", nil),
					field("secrets", 3, rep, msg, ".csikit.secretstest.Inner.SecretsEntry", secret()),
				},
				NestedType: []*descriptorpb.DescriptorProto{entry("SecretsEntry", str, "")},
			},
			{
				Name: proto.String("FutureResponse"),
				Field: []*descriptorpb.FieldDescriptorProto{
					field("plain", 1, opt, str, "", nil),
					field("inner", 2, opt, msg, ".csikit.secretstest.Inner", nil),
					field("items", 3, rep, msg, ".csikit.secretstest.Inner", nil),
					field("by_name", 4, rep, msg, ".csikit.secretstest.FutureResponse.ByNameEntry", nil),
					field("tokens", 5, rep, str, "", secret()),
					field("key", 6, opt, byt, "", secret()),
					field("secret_inner", 7, opt, msg, ".csikit.secretstest.Inner", secret()),
					field("pin", 8, opt, i64, "", secret()),
					field("secrets", 9, rep, msg, ".csikit.secretstest.FutureResponse.SecretsEntry", nil),
					field("labels", 10, rep, msg, ".csikit.secretstest.FutureResponse.LabelsEntry", nil),
					field("blobs", 11, rep, msg, ".csikit.secretstest.FutureResponse.BlobsEntry", secret()),
				},
				NestedType: []*descriptorpb.DescriptorProto{
					entry("ByNameEntry", msg, ".csikit.secretstest.Inner"),
					entry("SecretsEntry", str, ""),
					entry("LabelsEntry", str, ""),
					entry("BlobsEntry", byt, ""),
				},
			},
		},
	}
	fd, err := protodesc.NewFile(fdp, protoregistry.GlobalFiles)
	if err != nil {
		t.Fatalf("building the test schema: %v", err)
	}
	return fd.Messages().ByName("Inner"), fd.Messages().ByName("FutureResponse")
}

// newFuture fills every field of FutureResponse; each secret value contains
// "SECRET" and no other value does.
func newFuture(t testing.TB) proto.Message {
	t.Helper()
	innerD, outerD := futureSchema(t)
	newInner := func(n string) protoreflect.Message {
		m := dynamicpb.NewMessage(innerD)
		m.Set(innerD.Fields().ByName("token"), protoreflect.ValueOfString("SECRET-token-"+n))
		m.Set(innerD.Fields().ByName("name"), protoreflect.ValueOfString("name-"+n))
		mp := m.Mutable(innerD.Fields().ByName("secrets")).Map()
		mp.Set(protoreflect.ValueOfString("password").MapKey(), protoreflect.ValueOfString("SECRET-pw-"+n))
		return m
	}
	f := outerD.Fields()
	m := dynamicpb.NewMessage(outerD)
	m.Set(f.ByName("plain"), protoreflect.ValueOfString("plain"))
	m.Set(f.ByName("inner"), protoreflect.ValueOfMessage(newInner("inner")))
	items := m.Mutable(f.ByName("items")).List()
	items.Append(protoreflect.ValueOfMessage(newInner("item0")))
	items.Append(protoreflect.ValueOfMessage(newInner("item1")))
	m.Mutable(f.ByName("by_name")).Map().Set(protoreflect.ValueOfString("a").MapKey(),
		protoreflect.ValueOfMessage(newInner("mapped")))
	m.Mutable(f.ByName("tokens")).List().Append(protoreflect.ValueOfString("SECRET-tokens"))
	m.Set(f.ByName("key"), protoreflect.ValueOfBytes([]byte("SECRET-key")))
	m.Set(f.ByName("secret_inner"), protoreflect.ValueOfMessage(newInner("whole")))
	m.Set(f.ByName("pin"), protoreflect.ValueOfInt64(424242))
	m.Mutable(f.ByName("secrets")).Map().Set(protoreflect.ValueOfString("user").MapKey(),
		protoreflect.ValueOfString("SECRET-by-name"))
	m.Mutable(f.ByName("labels")).Map().Set(protoreflect.ValueOfString("zone").MapKey(),
		protoreflect.ValueOfString("eu-1"))
	m.Mutable(f.ByName("blobs")).Map().Set(protoreflect.ValueOfString("cert").MapKey(),
		protoreflect.ValueOfBytes([]byte("SECRET-blob")))
	return m
}
