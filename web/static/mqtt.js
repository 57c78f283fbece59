// A small MQTT 3.1.1 client over WebSocket, written for the xmq dashboard.
//
// Encodes CONNECT, SUBSCRIBE, UNSUBSCRIBE, PUBLISH (QoS 0, 1, 2), PUBACK,
// PUBREC, PUBREL, PUBCOMP, PINGREQ and DISCONNECT; decodes CONNACK, SUBACK,
// UNSUBACK, PUBLISH, PUBACK, PUBREC, PUBREL, PUBCOMP and PINGRESP. MQTT
// packets may span WebSocket messages and one message may hold several
// packets, so incoming bytes are buffered and cut into packets here.

const enc = new TextEncoder();

const CONNACK_REASONS = [
  'accepted',
  'unacceptable protocol version',
  'identifier rejected',
  'server unavailable',
  'bad user name or password',
  'not authorized',
];

// Packet types (the high nibble of the first byte).
const T = {
  CONNECT: 1, CONNACK: 2, PUBLISH: 3, PUBACK: 4, PUBREC: 5, PUBREL: 6, PUBCOMP: 7,
  SUBSCRIBE: 8, SUBACK: 9, UNSUBSCRIBE: 10, UNSUBACK: 11, PINGREQ: 12, PINGRESP: 13, DISCONNECT: 14,
};

function utf8(s) { return enc.encode(s); }

// varint encodes a Remaining Length.
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

export function encodeConnect({ clientId, username, password, keepalive, clean }) {
  let flags = clean ? 0x02 : 0;
  const payload = [str(clientId)];
  if (username) { flags |= 0x80; payload.push(str(username)); }
  if (password) { flags |= 0x40; payload.push(str(password)); }
  return packet(T.CONNECT << 4, [str('MQTT'), [4, flags], u16(keepalive), ...payload]);
}

export function encodePublish(topic, payload, qos, retain, id, dup) {
  const first = (T.PUBLISH << 4) | (dup ? 0x08 : 0) | (qos << 1) | (retain ? 1 : 0);
  const parts = [str(topic)];
  if (qos > 0) parts.push(u16(id));
  parts.push(payload);
  return packet(first, parts);
}

export function encodeSubscribe(id, filter, qos) {
  return packet((T.SUBSCRIBE << 4) | 0x02, [u16(id), str(filter), [qos]]);
}

function encodeUnsubscribe(id, filter) {
  return packet((T.UNSUBSCRIBE << 4) | 0x02, [u16(id), str(filter)]);
}

function ack(type, id) {
  const flags = type === T.PUBREL ? 0x02 : 0;
  return new Uint8Array([(type << 4) | flags, 2, id >> 8, id & 0xff]);
}

// decode cuts one packet off the front of buf. It returns null when buf
// holds only part of a packet, else {packet, rest}.
export function decode(buf) {
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
  const p = { type: first >> 4, flags: first & 0x0f };
  const id = () => (body[0] << 8) | body[1];
  switch (p.type) {
    case T.CONNACK:
      p.sessionPresent = (body[0] & 1) === 1;
      p.code = body[1];
      break;
    case T.PUBLISH: {
      p.qos = (p.flags >> 1) & 3;
      p.retain = (p.flags & 1) === 1;
      p.dup = (p.flags & 8) === 8;
      const tlen = (body[0] << 8) | body[1];
      p.topic = new TextDecoder().decode(body.subarray(2, 2 + tlen));
      let off = 2 + tlen;
      if (p.qos > 0) { p.id = (body[off] << 8) | body[off + 1]; off += 2; }
      p.payload = body.slice(off);
      break;
    }
    case T.PUBACK: case T.PUBREC: case T.PUBREL: case T.PUBCOMP: case T.UNSUBACK:
      p.id = id();
      break;
    case T.SUBACK:
      p.id = id();
      p.codes = Array.from(body.subarray(2));
      break;
  }
  return { packet: p, rest: buf.subarray(i + len) };
}

// MQTTClient is one connection. Events: onmessage(msg), onclose(reason),
// onstate(state) where state is 'connecting', 'connected' or 'closed'.
export class MQTTClient {
  constructor(url, opts = {}) {
    this.url = url;
    this.opts = {
      clientId: opts.clientId || 'xmq-dashboard-' + Math.random().toString(16).slice(2, 10),
      username: opts.username || '',
      password: opts.password || '',
      keepalive: opts.keepalive ?? 30,
      clean: opts.clean ?? true,
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
              this.setState('connected');
              this.startPing();
              resolve(p);
            } else {
              reject(new Error('refused: ' + (CONNACK_REASONS[p.code] || 'code ' + p.code)));
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
        const why = ev.reason || (ev.code === 1000 ? 'closed' : 'connection lost (code ' + ev.code + ')');
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
      const d = decode(bytes);
      if (!d) break;
      bytes = d.rest;
      if (!connack(d.packet)) this.handle(d.packet);
    }
    this.buf = bytes.slice();
  }

  handle(p) {
    const settle = (id, value) => {
      const w = this.pending.get(id);
      if (w) { this.pending.delete(id); w.resolve(value); }
    };
    switch (p.type) {
      case T.PUBLISH:
        if (p.qos === 1) this.send(ack(T.PUBACK, p.id));
        if (p.qos === 2) {
          this.send(ack(T.PUBREC, p.id));
          if (this.inboundQoS2.has(p.id)) return; // a resend: delivered already
          this.inboundQoS2.add(p.id);
        }
        this.onmessage({ topic: p.topic, payload: p.payload, qos: p.qos, retain: p.retain, dup: p.dup, time: new Date() });
        break;
      case T.PUBREL:
        this.inboundQoS2.delete(p.id);
        this.send(ack(T.PUBCOMP, p.id));
        break;
      case T.PUBREC:
        this.send(ack(T.PUBREL, p.id));
        break;
      case T.PUBACK: case T.PUBCOMP: case T.UNSUBACK:
        settle(p.id, p);
        break;
      case T.SUBACK:
        settle(p.id, p.codes);
        break;
      case T.PINGRESP:
        this.lastPong = Date.now();
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
    const codes = await this.await((id) => encodeSubscribe(id, filter, qos));
    if (codes[0] === 0x80) throw new Error('subscription to ' + filter + ' refused');
    return codes[0];
  }

  async unsubscribe(filter) {
    await this.await((id) => encodeUnsubscribe(id, filter));
  }

  // publish resolves when the message is sent (QoS 0) or acknowledged.
  async publish(topic, payload, { qos = 0, retain = false } = {}) {
    const body = typeof payload === 'string' ? utf8(payload) : payload;
    if (qos === 0) {
      this.send(encodePublish(topic, body, 0, retain, 0, false));
      return;
    }
    await this.await((id) => encodePublish(topic, body, qos, retain, id, false));
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
