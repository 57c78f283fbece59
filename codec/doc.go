// Package codec owns the MQTT wire format: every control packet of MQTT 3.1
// (protocol level 3), 3.1.1 (level 4) and 5.0 (level 5), their properties and
// reason codes, the normative validation rules, and the topic-name and
// topic-filter rules that the router, the ACLs and the load test share.
//
// Encoding is append-style: every packet has an exact Len(version) and an
// Append(dst, version) that allocates nothing when dst has room.
//
// Decoding is in place. Byte slices in a decoded packet (topic, payload,
// client id, property values …) alias the buffer the packet was decoded
// from. A packet returned by Reader.ReadPacket is valid only until the next
// call to ReadPacket on the same Reader, exactly like bufio.Reader.Peek; a
// caller that keeps anything longer must copy it. Decode from a byte slice
// aliases that slice.
//
// Every validation failure is an *Error that carries the MQTT 5 reason code
// (Malformed Packet, Protocol Error, Packet Too Large …) so the broker can
// answer with the right CONNACK or DISCONNECT; checks cite the normative
// statement they enforce as [MQTT-x.y.z-n].
//
// The package depends on the standard library only. Nothing in it is safe
// for concurrent use except the pure functions (topic helpers, Decode).
package codec
