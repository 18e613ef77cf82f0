"""Host names and addresses replaced by stable pseudonyms (`--redact-hostnames`); pure.

The same name or address always gets the same pseudonym (`host-1`, `ip-1`), in every text,
path, key and listing of a bundle, so the bundle still replays (a path built from a redacted
variable finds the redacted key) and a reader can still follow one machine through it. The
mapping itself stays on the recording machine (the summary shows it; the bundle never holds
it).

What counts as the machine's name: its host name as recorded, anywhere in a text, whatever
surrounds it (`node-prod-17_worker0`, `/var/log/node-prod-17/`), case-insensitively; its short
name (before the first dot) likewise. A short name of fewer than 6 letters with no digit or
`-` (`node`, `a2`) is matched only as a whole word, or it would eat ordinary words. Also:
URL host names; IPv4-shaped tokens (zero-padded `010.020.030.040` is the same address as
`10.20.30.40`); AWS-style `ip-10-20-30-40` names; Kubernetes pod names (a Deployment's
`name-<hash>-<5 chars>`, and the StatefulSet siblings `name-N` of this machine's own name);
pod DNS names (`10-244-1-5.ns.pod.cluster.local`: the dashed address); IPv6 addresses.
Loopback and unspecified addresses are kept.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Iterable

Fit = Callable[[str, str], str]  # (original, pseudonym) -> what replaces it

_IPV4 = re.compile(r"(?<![\w.])(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})(?![\w]|\.\d)")
_AWS_NAME = re.compile(r"(?i)(?<![a-z0-9])ip-(\d{1,3})-(\d{1,3})-(\d{1,3})-(\d{1,3})(?![0-9])")
# A pod's DNS name is its address with dashes: `10-244-1-5.<namespace>.pod.<cluster domain>`
# (kubernetes.io/docs/concepts/services-networking/dns-pod-service/, "A/AAAA records")
_POD_DNS = re.compile(r"(?i)(?<![a-z0-9.-])(\d{1,3})-(\d{1,3})-(\d{1,3})-(\d{1,3})"
                      r"(?=\.[a-z0-9-]+\.pod\.)")
_IPV6 = re.compile(r"(?<![\w:.])(?=[0-9A-Fa-f:]*:[0-9A-Fa-f:]*:)[0-9A-Fa-f:]{2,39}(?![\w:])")
_URL_HOST = re.compile(
    r"(?i)\b[a-z][a-z0-9+.-]*://(?:[^\s/@'\"<>]*@)?([a-z0-9-]+(?:\.[a-z0-9-]+)+)")
# Kubernetes generates pod-name suffixes from an alphabet without vowels and look-alike digits
# (k8s.io/apimachinery pkg/util/rand, "alphanums"): a Deployment's pod is
# <deployment>-<pod-template-hash>-<5 chars>.
_SAFE = "bcdfghjklmnpqrstvwxz2456789"
_POD = re.compile(rf"(?<![a-z0-9-])[a-z0-9](?:[a-z0-9-]*[a-z0-9])?-[{_SAFE}]{{6,10}}-[{_SAFE}]{{5}}"
                  rf"(?![a-z0-9-])")
# "version 1.2.3.4" and "Version=1.2.3.4": a four-part version number, not an address
_VERSION_BEFORE = re.compile(r"(?i)version[\s:=\[\"']*$")


class Pseudonyms:
    """Consistent replacements: the same host or address always gets the same name."""

    def __init__(self, hostnames: Iterable[str] = ()) -> None:
        self.hosts: dict[str, str] = {}  # lower-cased name -> host-N
        self.addresses: dict[str, str] = {}  # canonical address -> ip-N
        self._patterns: list[tuple[str, re.Pattern[str]]] = []
        for name in hostnames:
            self.add_host(name)

    def add_host(self, name: str) -> None:
        """A name to replace wherever it appears (the machine's own names)."""
        key = name.lower()
        if len(key) < 2 or key in self.hosts:
            return
        self.host(key)
        whole_word = len(key) < 6 and not re.search(r"[0-9-]", key)
        body = re.escape(key)
        pattern = rf"(?i)(?<![a-z0-9]){body}(?![a-z0-9])" if whole_word else rf"(?i){body}"
        self._patterns.append((key, re.compile(pattern)))
        self._patterns.sort(key=lambda item: len(item[0]), reverse=True)  # FQDN before short
        stateful = re.fullmatch(r"(.{4,})-\d+", key)
        if stateful:
            self._patterns.append((key, re.compile(
                rf"(?i)(?<![a-z0-9]){re.escape(stateful.group(1))}-\d+(?![0-9])")))

    def host(self, name: str) -> str:
        return self.hosts.setdefault(name.lower(), f"host-{len(self.hosts) + 1}")

    def ip(self, address: str) -> str:
        return self.addresses.setdefault(address, f"ip-{len(self.addresses) + 1}")

    def mapping(self) -> list[tuple[str, str]]:
        """(pseudonym, original), for the person who made the bundle; never written into it."""
        return [(p, o) for o, p in (*self.hosts.items(), *self.addresses.items())]

    def apply(self, text: str, fit: Fit, kinds: set[str]) -> str:
        for _, pattern in self._patterns:
            text, count = pattern.subn(lambda m: fit(m.group(0), self.host(m.group(0))), text)
            if count:
                kinds.add("hostname")
        text = _URL_HOST.sub(lambda m: self._url_host(m, fit, kinds), text)
        text = _POD.sub(lambda m: self._named_host(m.group(0), fit, kinds), text)
        text = _AWS_NAME.sub(lambda m: self._v4(m, fit, kinds, m.group(0)), text)
        text = _POD_DNS.sub(lambda m: self._v4(m, fit, kinds, m.group(0)), text)
        text = _IPV4.sub(lambda m: self._v4(m, fit, kinds, m.group(0)), text)
        return _IPV6.sub(lambda m: self._v6(m.group(0), fit, kinds), text)

    def _named_host(self, name: str, fit: Fit, kinds: set[str]) -> str:
        if name.startswith("host-") or name.startswith("ip-"):
            return name  # one of ours
        kinds.add("hostname")
        return fit(name, self.host(name))

    def _url_host(self, m: re.Match[str], fit: Fit, kinds: set[str]) -> str:
        host = m.group(1)
        if _IPV4.fullmatch(host) or host.lower() == "localhost":
            return m.group(0)  # addresses have their own rule
        start = m.start(1) - m.start(0)
        return m.group(0)[:start] + self._named_host(host, fit, kinds)

    def _v4(self, m: re.Match[str], fit: Fit, kinds: set[str], original: str) -> str:
        octets = [int(g) for g in m.groups()]
        if max(octets) > 255 or _VERSION_BEFORE.search(m.string[max(0, m.start() - 12):m.start()]):
            return original
        address = ipaddress.IPv4Address(".".join(map(str, octets)))
        if address.is_loopback or address.is_unspecified:
            return original
        kinds.add("ip-address")
        return fit(original, self.ip(str(address)))

    def _v6(self, text: str, fit: Fit, kinds: set[str]) -> str:
        try:
            address = ipaddress.IPv6Address(text)
        except ValueError:
            return text
        if address.is_loopback or address.is_unspecified:
            return text
        kinds.add("ip-address")
        return fit(text, self.ip(str(address)))
