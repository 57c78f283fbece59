// A small MQTT 3.1.1 and 5.0 client over WebSocket, written for the xmq
// dashboard.
//
// Encodes CONNECT, SUBSCRIBE, UNSUBSCRIBE, PUBLISH (QoS 0, 1, 2), PUBACK,
// PUBREC, PUBREL, PUBCOMP, PINGREQ and DISCONNECT; decodes CONNACK, SUBACK,
// UNSUBACK, PUBLISH, PUBACK, PUBREC, PUBREL, PUBCOMP, PINGRESP and (MQTT 5)
// DISCONNECT. With MQTT 5 a PUBLISH carries the properties a subscriber
// sees (payload format, message expiry, content type, response topic,
// correlation data, user properties) both ways, and refusals come with
// their reason code and string. MQTT packets may span WebSocket messages
// and one message may hold several packets, so incoming bytes are buffered
// and cut into packets here.

const enc = new TextEncoder();
const dec = new TextDecoder();

const CONNACK_REASONS = [
  'accepted',
  'unacceptable protocol version',
  'identifier rejected',
  'server unavailable',
  'bad user name or password',
  'not authorized',
];

// MQTT 5 reason codes of refusals (0x80 and up) and of the successes a
// client may meet.
const REASONS = {
  0x00: 'success', 0x01: 'granted QoS 1', 0x02: 'granted QoS 2', 0x10: 'no matching subscribers',
  0x11: 'no subscription existed', 0x80: 'unspecified error', 0x81: 'malformed packet', 0x82: 'protocol error',
  0x83: 'implementation specific error', 0x84: 'unsupported protocol version', 0x85: 'client identifier not valid',
  0x86: 'bad user name or password', 0x87: 'not authorized', 0x88: 'server unavailable', 0x89: 'server busy',
  0x8a: 'banned', 0x8b: 'server shutting down', 0x8c: 'bad authentication method', 0x8d: 'keep alive timeout',
  0x8e: 'session taken over', 0x8f: 'topic filter invalid', 0x90: 'topic name invalid', 0x91: 'packet identifier in use',
  0x93: 'receive maximum exceeded', 0x94: 'topic alias invalid', 0x95: 'packet too large', 0x96: 'message rate too high',
  0x97: 'quota exceeded', 0x98: 'administrative action', 0x99: 'payload format invalid', 0x9a: 'retain not supported',
  0x9b: 'QoS not supported', 0x9c: 'use another server', 0x9d: 'server moved', 0x9e: 'shared subscriptions not supported',
  0x9f: 'connection rate exceeded', 0xa1: 'subscription identifiers not supported', 0xa2: 'wildcard subscriptions not supported',
};

export function reasonText(code) {
  return REASONS[code] || 'reason code 0x' + code.toString(16);
}

// Packet types (the high nibble of the first byte).
const T = {
  CONNECT: 1, CONNACK: 2, PUBLISH: 3, PUBACK: 4, PUBREC: 5, PUBREL: 6, PUBCOMP: 7,
  SUBSCRIBE: 8, SUBACK: 9, UNSUBSCRIBE: 10, UNSUBACK: 11, PINGREQ: 12, PINGRESP: 13, DISCONNECT: 14,
};

// MQTT 5 property identifiers this client writes or reads by name.
const P = {
  payloadFormat: 0x01, messageExpiry: 0x02, contentType: 0x03, responseTopic: 0x08, correlationData: 0x09,
  subscriptionId: 0x0b, sessionExpiry: 0x11, assignedClientId: 0x12, serverKeepAlive: 0x13, reasonString: 0x1f,
  topicAlias: 0x23, userProperty: 0x26,
};

// The wire type of every MQTT 5 property, for reading ones this client
// does not name.
const PROP_TYPES = {
  0x01: 'byte', 0x02: 'u32', 0x03: 'str', 0x08: 'str', 0x09: 'bin', 0x0b: 'varint', 0x11: 'u32', 0x12: 'str',
  0x13: 'u16', 0x15: 'str', 0x16: 'bin', 0x17: 'byte', 0x18: 'u32', 0x19: 'byte', 0x1a: 'str', 0x1c: 'str',
  0x1f: 'str', 0x21: 'u16', 0x22: 'u16', 0x23: 'u16', 0x24: 'byte', 0x25: 'byte', 0x26: 'pair', 0x27: 'u32',
  0x28: 'byte', 0x29: 'byte', 0x2a: 'byte',
};

function utf8(s) { return enc.encode(s); }

// varint encodes a Variable Byte Integer (Remaining Length, property lengths).
function varint(n) {
  const out = [];
  do {
    let b = n % 128;
    n = Math.floor(n / 128);
    if (n > 0) b |= 0x80;
    out.push(b);
  } while (n > 0);
  return out;
}

// packet assembles a fixed header byte and body parts (arrays of bytes or
// Uint8Arrays) into one Uint8Array.
function packet(first, parts) {
  let len = 0;
  for (const p of parts) len += p.length;
  const head = [first, ...varint(len)];
  const out = new Uint8Array(head.length + len);
  out.set(head, 0);
  let off = head.length;
  for (const p of parts) { out.set(p, off); off += p.length; }
  return out;
}

function str(s) {
  const b = typeof s === 'string' ? utf8(s) : s;
  if (b.length > 65535) throw new Error('string longer than 65535 bytes');
  return [b.length >> 8, b.length & 0xff, ...b];
}

function u16(n) { return [n >> 8, n & 0xff]; }
function u32(n) { return [(n >>> 24) & 0xff, (n >>> 16) & 0xff, (n >>> 8) & 0xff, n & 0xff]; }

// encodeProps writes the MQTT 5 properties of a PUBLISH: props holds
// payloadFormat, messageExpiry (seconds), contentType, responseTopic,
// correlationData (string or bytes) and userProperties ([[key, value]]);
// empty ones are left out.
export function encodeProps(props = {}) {
  const b = [];
  if (props.payloadFormat !== undefined && props.payloadFormat !== null) b.push(P.payloadFormat, props.payloadFormat ? 1 : 0);
  if (props.messageExpiry) b.push(P.messageExpiry, ...u32(props.messageExpiry));
  if (props.contentType) b.push(P.contentType, ...str(props.contentType));
  if (props.responseTopic) b.push(P.responseTopic, ...str(props.responseTopic));
  if (props.correlationData && props.correlationData.length) b.push(P.correlationData, ...str(props.correlationData));
  for (const [k, v] of props.userProperties || []) b.push(P.userProperty, ...str(k), ...str(v));
  return [...varint(b.length), ...b];
}

// readProps reads MQTT 5 properties at off and returns {props, off}:
// props has the named ones (userProperties as [[key, value]]) and every
// other by its identifier.
function readProps(body, off) {
  let len = 0, mult = 1;
  for (;;) {
    if (off >= body.length) throw new Error('truncated properties');
    const c = body[off++];
    len += (c & 0x7f) * mult;
    if ((c & 0x80) === 0) break;
    mult *= 128;
  }
  const end = off + len;
  if (end > body.length) throw new Error('properties longer than the packet');
  const props = {};
  const rstr = () => {
    const n = (body[off] << 8) | body[off + 1];
    const s = body.subarray(off + 2, off + 2 + n);
    off += 2 + n;
    return s;
  };
  while (off < end) {
    const id = body[off++];
    let v;
    switch (PROP_TYPES[id]) {
      case 'byte': v = body[off++]; break;
      case 'u16': v = (body[off] << 8) | body[off + 1]; off += 2; break;
      case 'u32': v = ((body[off] << 24) >>> 0) + (body[off + 1] << 16) + (body[off + 2] << 8) + body[off + 3]; off += 4; break;
      case 'varint': {
        v = 0; let m = 1;
        for (;;) { const c = body[off++]; v += (c & 0x7f) * m; if ((c & 0x80) === 0) break; m *= 128; }
        break;
      }
      case 'str': v = dec.decode(rstr()); break;
      case 'bin': v = rstr().slice(); break;
      case 'pair': {
        const k = dec.decode(rstr());
        (props.userProperties ||= []).push([k, dec.decode(rstr())]);
        continue;
      }
      default: throw new Error('unknown property 0x' + id.toString(16));
    }
    switch (id) {
      case P.payloadFormat: props.payloadFormat = v; break;
      case P.messageExpiry: props.messageExpiry = v; break;
      case P.contentType: props.contentType = v; break;
      case P.responseTopic: props.responseTopic = v; break;
      case P.correlationData: props.correlationData = v; break;
      case P.subscriptionId: (props.subscriptionIds ||= []).push(v); break;
      case P.reasonString: props.reasonString = v; break;
      case P.assignedClientId: props.assignedClientId = v; break;
      case P.serverKeepAlive: props.serverKeepAlive = v; break;
      case P.topicAlias: props.topicAlias = v; break;
      default: props[id] = v;
    }
  }
  return { props, off: end };
}

export function encodeConnect({ clientId, username, password, keepalive, clean, version = 4 }) {
  let flags = clean ? 0x02 : 0;
  const payload = [str(clientId)];
  if (username) { flags |= 0x80; payload.push(str(username)); }
  if (password) { flags |= 0x40; payload.push(str(password)); }
  const head = [str('MQTT'), [version, flags], u16(keepalive)];
  if (version === 5) head.push([0]); // no properties
  return packet(T.CONNECT << 4, [...head, ...payload]);
}

export function encodePublish(topic, payload, qos, retain, id, dup, version = 4, props) {
  const first = (T.PUBLISH << 4) | (dup ? 0x08 : 0) | (qos << 1) | (retain ? 1 : 0);
  const parts = [str(topic)];
  if (qos > 0) parts.push(u16(id));
  if (version === 5) parts.push(encodeProps(props));
  parts.push(payload);
  return packet(first, parts);
}

export function encodeSubscribe(id, filter, qos, version = 4) {
  const parts = [u16(id)];
  if (version === 5) parts.push([0]);
  parts.push(str(filter), [qos]);
  return packet((T.SUBSCRIBE << 4) | 0x02, parts);
}

function encodeUnsubscribe(id, filter, version) {
  const parts = [u16(id)];
  if (version === 5) parts.push([0]);
  parts.push(str(filter));
  return packet((T.UNSUBSCRIBE << 4) | 0x02, parts);
}

// ack is PUBACK, PUBREC, PUBREL or PUBCOMP with success: the packet id
// alone, which MQTT 5 reads as reason code 0 too.
function ack(type, id) {
  const flags = type === T.PUBREL ? 0x02 : 0;
  return new Uint8Array([(type << 4) | flags, 2, id >> 8, id & 0xff]);
}

// decode cuts one packet off the front of buf for a connection at
// protocol level version. It returns null when buf holds only part of a
// packet, else {packet, rest}.
export function decode(buf, version = 4) {
  if (buf.length < 2) return null;
  let len = 0, mult = 1, i = 1;
  for (;;) {
    if (i >= buf.length) return null;
    const b = buf[i++];
    len += (b & 0x7f) * mult;
    if ((b & 0x80) === 0) break;
    mult *= 128;
    if (i > 4) throw new Error('malformed remaining length');
  }
  if (buf.length < i + len) return null;
  const first = buf[0];
  const body = buf.subarray(i, i + len);
  const p = { type: first >> 4, flags: first & 0x0f, props: {} };
  const id = () => (body[0] << 8) | body[1];
  const v5 = version === 5;
  switch (p.type) {
    case T.CONNACK:
      p.sessionPresent = (body[0] & 1) === 1;
      p.code = body[1];
      if (v5 && body.length > 2) p.props = readProps(body, 2).props;
      break;
    case T.PUBLISH: {
      p.qos = (p.flags >> 1) & 3;
      p.retain = (p.flags & 1) === 1;
      p.dup = (p.flags & 8) === 8;
      const tlen = (body[0] << 8) | body[1];
      p.topic = dec.decode(body.subarray(2, 2 + tlen));
      let off = 2 + tlen;
      if (p.qos > 0) { p.id = (body[off] << 8) | body[off + 1]; off += 2; }
      if (v5) ({ props: p.props, off } = readProps(body, off));
      p.payload = body.slice(off);
      break;
    }
    case T.PUBACK: case T.PUBREC: case T.PUBREL: case T.PUBCOMP:
      p.id = id();
      p.code = body.length > 2 ? body[2] : 0;
      if (v5 && body.length > 3) p.props = readProps(body, 3).props;
      break;
    case T.SUBACK: case T.UNSUBACK: {
      p.id = id();
      let off = 2;
      if (v5) ({ props: p.props, off } = readProps(body, off));
      p.codes = Array.from(body.subarray(off));
      break;
    }
    case T.DISCONNECT:
      p.code = body.length > 0 ? body[0] : 0;
      if (v5 && body.length > 1) p.props = readProps(body, 1).props;
      break;
  }
  return { packet: p, rest: buf.subarray(i + len) };
}

// refusal describes a refusing reason code with the server's reason string.
function refusal(code, props) {
  return reasonText(code) + (props?.reasonString ? ': ' + props.reasonString : '');
}

// MQTTClient is one connection. opts.version is 4 (MQTT 3.1.1, the
// default) or 5. Events: onmessage(msg) with msg.props for MQTT 5,
// onclose(reason), onstate(state) where state is 'connecting', 'connected'
// or 'closed'.
export class MQTTClient {
  constructor(url, opts = {}) {
    this.url = url;
    this.opts = {
      clientId: opts.clientId || 'xmq-dashboard-' + Math.random().toString(16).slice(2, 10),
      username: opts.username || '',
      password: opts.password || '',
      keepalive: opts.keepalive ?? 30,
      clean: opts.clean ?? true,
      version: opts.version === 5 ? 5 : 4,
    };
    this.nextId = 1;
    this.pending = new Map(); // packet id → {resolve, reject}
    this.inboundQoS2 = new Set(); // packet ids received at QoS 2, awaiting PUBREL
    this.buf = new Uint8Array(0);
    this.state = 'closed';
    this.onmessage = () => {};
    this.onclose = () => {};
    this.onstate = () => {};
  }

  get clientId() { return this.opts.clientId; }
  get version() { return this.opts.version; }

  setState(s) { this.state = s; this.onstate(s); }

  // connect opens the WebSocket and sends CONNECT; it resolves on a
  // successful CONNACK and rejects with the reason otherwise.
  connect() {
    return new Promise((resolve, reject) => {
      let settled = false;
      const fail = (why) => {
        if (!settled) { settled = true; reject(new Error(why)); }
      };
      this.setState('connecting');
      let ws;
      try {
        ws = new WebSocket(this.url, ['mqtt']);
      } catch (e) {
        this.setState('closed');
        fail(e.message);
        return;
      }
      this.ws = ws;
      ws.binaryType = 'arraybuffer';
      ws.onopen = () => ws.send(encodeConnect(this.opts));
      ws.onmessage = (ev) => {
        try {
          this.receive(new Uint8Array(ev.data), (p) => {
            if (p.type !== T.CONNACK || settled) return false;
            settled = true;
            if (p.code === 0) {
              // MQTT 5: the server may assign the client id and the keepalive.
              if (p.props.assignedClientId) this.opts.clientId = p.props.assignedClientId;
              if (p.props.serverKeepAlive !== undefined) this.opts.keepalive = p.props.serverKeepAlive;
              this.setState('connected');
              this.startPing();
              resolve(p);
            } else {
              const why = this.version === 5 ? refusal(p.code, p.props) : (CONNACK_REASONS[p.code] || 'code ' + p.code);
              reject(new Error('refused: ' + why));
              ws.close();
            }
            return true;
          });
        } catch (e) {
          this.close('protocol error: ' + e.message);
        }
      };
      ws.onerror = () => fail('cannot open ' + this.url);
      ws.onclose = (ev) => {
        const why = this.serverReason || ev.reason || (ev.code === 1000 ? 'closed' : 'connection lost (code ' + ev.code + ')');
        fail(why);
        this.cleanup(why);
      };
    });
  }

  receive(bytes, connack) {
    if (this.buf.length) {
      const b = new Uint8Array(this.buf.length + bytes.length);
      b.set(this.buf, 0);
      b.set(bytes, this.buf.length);
      bytes = b;
    }
    for (;;) {
      const d = decode(bytes, this.version);
      if (!d) break;
      bytes = d.rest;
      if (!connack(d.packet)) this.handle(d.packet);
    }
    this.buf = bytes.slice();
  }

  handle(p) {
    const settle = (id, value, err) => {
      const w = this.pending.get(id);
      if (!w) return;
      this.pending.delete(id);
      if (err) w.reject(new Error(err));
      else w.resolve(value);
    };
    switch (p.type) {
      case T.PUBLISH:
        if (p.qos === 1) this.send(ack(T.PUBACK, p.id));
        if (p.qos === 2) {
          this.send(ack(T.PUBREC, p.id));
          if (this.inboundQoS2.has(p.id)) return; // a resend: delivered already
          this.inboundQoS2.add(p.id);
        }
        this.onmessage({ topic: p.topic, payload: p.payload, qos: p.qos, retain: p.retain, dup: p.dup, props: p.props, time: new Date() });
        break;
      case T.PUBREL:
        this.inboundQoS2.delete(p.id);
        this.send(ack(T.PUBCOMP, p.id));
        break;
      case T.PUBREC:
        if (p.code >= 0x80) { settle(p.id, null, 'publish refused: ' + refusal(p.code, p.props)); break; }
        this.send(ack(T.PUBREL, p.id));
        break;
      case T.PUBACK: case T.PUBCOMP:
        if (p.code >= 0x80) settle(p.id, null, 'publish refused: ' + refusal(p.code, p.props));
        else settle(p.id, p);
        break;
      case T.UNSUBACK:
        settle(p.id, p);
        break;
      case T.SUBACK:
        settle(p.id, p);
        break;
      case T.PINGRESP:
        this.lastPong = Date.now();
        break;
      case T.DISCONNECT:
        // MQTT 5: the server says why it closes; the WebSocket close follows.
        this.serverReason = 'disconnected by the server: ' + refusal(p.code, p.props);
        break;
    }
  }

  send(bytes) {
    if (!this.ws || this.ws.readyState !== WebSocket.OPEN) throw new Error('not connected');
    this.ws.send(bytes);
  }

  id() {
    for (let i = 0; i < 65535; i++) {
      const id = this.nextId;
      this.nextId = this.nextId === 65535 ? 1 : this.nextId + 1;
      if (!this.pending.has(id)) return id;
    }
    throw new Error('too many requests in flight');
  }

  // await sends a packet carrying a new packet id and waits for its answer.
  await(build, timeoutMs = 10000) {
    return new Promise((resolve, reject) => {
      const id = this.id();
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(new Error('no answer from the broker'));
      }, timeoutMs);
      this.pending.set(id, {
        resolve: (v) => { clearTimeout(timer); resolve(v); },
        reject: (e) => { clearTimeout(timer); reject(e); },
      });
      try {
        this.send(build(id));
      } catch (e) {
        this.pending.get(id)?.reject(e);
        this.pending.delete(id);
      }
    });
  }

  // subscribe resolves with the granted QoS, or rejects when refused.
  async subscribe(filter, qos = 0) {
    const p = await this.await((id) => encodeSubscribe(id, filter, qos, this.version));
    const code = p.codes[0];
    if (code >= 0x80) {
      throw new Error('subscription to ' + filter + ' refused' + (this.version === 5 ? ': ' + refusal(code, p.props) : ''));
    }
    return code;
  }

  async unsubscribe(filter) {
    await this.await((id) => encodeUnsubscribe(id, filter, this.version));
  }

  // publish resolves when the message is sent (QoS 0) or acknowledged; an
  // MQTT 5 refusal (Not authorized, Quota exceeded …) rejects it. props
  // are the MQTT 5 properties (encodeProps), ignored with MQTT 3.1.1.
  async publish(topic, payload, { qos = 0, retain = false, props } = {}) {
    const body = typeof payload === 'string' ? utf8(payload) : payload;
    if (qos === 0) {
      this.send(encodePublish(topic, body, 0, retain, 0, false, this.version, props));
      return;
    }
    await this.await((id) => encodePublish(topic, body, qos, retain, id, false, this.version, props));
  }

  startPing() {
    const ka = this.opts.keepalive;
    if (!ka) return;
    this.lastPong = Date.now();
    this.pinger = setInterval(() => {
      if (Date.now() - this.lastPong > ka * 1500) {
        this.close('no answer to PINGREQ');
        return;
      }
      try { this.send(new Uint8Array([T.PINGREQ << 4, 0])); } catch { /* closing */ }
    }, Math.max(1000, ka * 750));
  }

  // close sends DISCONNECT and closes the WebSocket.
  close(reason = 'closed') {
    if (this.ws && this.ws.readyState === WebSocket.OPEN) {
      try { this.ws.send(new Uint8Array([T.DISCONNECT << 4, 0])); } catch { /* closing */ }
      this.ws.close(1000, reason.slice(0, 120));
    }
    this.cleanup(reason);
  }

  cleanup(reason) {
    if (this.state === 'closed' && !this.pinger) return;
    clearInterval(this.pinger);
    this.pinger = null;
    for (const w of this.pending.values()) w.reject(new Error(reason));
    this.pending.clear();
    this.setState('closed');
    this.onclose(reason);
  }
}
