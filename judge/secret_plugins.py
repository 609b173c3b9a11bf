"""The detectors :mod:`judge.secrets` runs: detect-secrets' plugins plus a few regexes.

detect-secrets' default plugin set, instantiated directly, except:

- ``IPPublicDetector``: a public address in a diagnosis is not a credential;
- ``HexHighEntropyString``: it flags image digests and commit ids, which diagnoses quote.

Its ``KeywordDetector`` runs twice: in its default mode (quoted values) and in its
config-file mode (``DB_PASSWORD: hunter2``, ``password=hunter2``), because agents paste
``kubectl describe`` output and environment listings.

The regexes cover what detect-secrets misses; each captures the secret in group 1:
URLs with an empty user, quoted values with spaces (after a key, quoted or not, or in
prose), passwords in JSON inside a JSON string (``{\\"password\\": \\"x\\"}``), bearer
tokens, ``*_TOKEN=`` assignments (also inside a JSON string), bare OpenAI keys
(``sk-...``, ``sk-proj-...``: detect-secrets knows only the old ``T3BlbkFJ`` form),
``Authorization: Basic <base64>`` headers, passwords written in prose ("the password is
hunter2"), which count only when the value looks like one (a digit or a symbol in it,
or quoted), so "the password is rejected" stays, an AWS secret access key after the
word "secret", passwords on command lines (``mysql -pX``, ``redis-cli -a X``,
``--password=X``; a quoted one whole) and cookies (``Cookie:`` headers, also as a JSON
or Python key, ``curl --cookie``). :data:`ENV_ENTRY` finds the value of a pod's env
entry named like a credential (``- name: DB_PASSWORD`` / ``value: hunter22``, also as
JSON inside a JSON string), which spans two lines and so is matched over the whole
text. Every value ends at an escaped line break (:func:`cut_at_escaped_break`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from detect_secrets.plugins.artifactory import ArtifactoryDetector
from detect_secrets.plugins.aws import AWSKeyDetector
from detect_secrets.plugins.azure_storage_key import AzureStorageKeyDetector
from detect_secrets.plugins.base import BasePlugin
from detect_secrets.plugins.basic_auth import BasicAuthDetector
from detect_secrets.plugins.cloudant import CloudantDetector
from detect_secrets.plugins.discord import DiscordBotTokenDetector
from detect_secrets.plugins.github_token import GitHubTokenDetector
from detect_secrets.plugins.gitlab_token import GitLabTokenDetector
from detect_secrets.plugins.high_entropy_strings import (
    Base64HighEntropyString,
    HighEntropyStringsPlugin,
)
from detect_secrets.plugins.ibm_cloud_iam import IbmCloudIamDetector
from detect_secrets.plugins.ibm_cos_hmac import IbmCosHmacDetector
from detect_secrets.plugins.jwt import JwtTokenDetector
from detect_secrets.plugins.keyword import CONFIG_DENYLIST_REGEX_TO_GROUP, KeywordDetector
from detect_secrets.plugins.mailchimp import MailchimpDetector
from detect_secrets.plugins.npm import NpmDetector
from detect_secrets.plugins.openai import OpenAIDetector
from detect_secrets.plugins.private_key import PrivateKeyDetector
from detect_secrets.plugins.pypi_token import PypiTokenDetector
from detect_secrets.plugins.sendgrid import SendGridDetector
from detect_secrets.plugins.slack import SlackDetector
from detect_secrets.plugins.softlayer import SoftlayerDetector
from detect_secrets.plugins.square_oauth import SquareOAuthDetector
from detect_secrets.plugins.stripe import StripeDetector
from detect_secrets.plugins.telegram_token import TelegramBotTokenDetector
from detect_secrets.plugins.twilio import TwilioKeyDetector

__all__ = ["ENV_ENTRY", "PLUGINS", "SecretPlugin", "cut_at_escaped_break", "kind_of"]

#: a line break or a tab written as an escape (``\n``, ``\r\n``, ``\t``), as a tool's
#: output quoted in a JSON string shows it: it ends a value as the character itself
#: would (not an escaped backslash before an ``n``: ``C:\\new``)
_ESCAPED_BREAK = re.compile(r"(?:(?<!\\)\\[nrt])+")


def cut_at_escaped_break(value: str) -> str:
    """``value`` up to its first escaped line break or tab: ``hunter22\\nUSER_PORT=9999``
    is the password ``hunter22`` and the next line of the text it was quoted from."""
    return _ESCAPED_BREAK.split(value, maxsplit=1)[0]


@dataclass(frozen=True, slots=True)
class SecretPlugin:
    """One detector and the kind its findings are reported as."""

    kind: str
    detector: BasePlugin | re.Pattern[str]
    #: a keyword detector: the value follows a key such as ``password``
    keyword: bool = False
    #: the keyword detector's config-file mode (unquoted values)
    config_mode: bool = False

    def values(self, line: str) -> Iterator[str]:
        """The values a detect-secrets detector reports in ``line``, each to its first
        escaped line break (:func:`cut_at_escaped_break`); a high-entropy string is read
        as the lines it quotes, each reported only above the detector's entropy limit. A
        regex is matched by the caller."""
        detector = self.detector
        if isinstance(detector, re.Pattern):
            raise TypeError(f"{self.kind}: a regex, not a detect-secrets detector")
        if isinstance(detector, KeywordDetector) and self.config_mode:
            values = detector.analyze_string(line, CONFIG_DENYLIST_REGEX_TO_GROUP)
        else:
            values = detector.analyze_string(line)
        for value in values:
            if not isinstance(detector, HighEntropyStringsPlugin):
                yield cut_at_escaped_break(value)
                continue
            for piece in _ESCAPED_BREAK.split(value):
                if detector.calculate_shannon_entropy(piece) > detector.entropy_limit:
                    yield piece


def kind_of(secret_type: str) -> str:
    """A detect-secrets ``secret_type`` as a marker kind: ``AWS Access Key``, ``aws-access-key``."""
    return re.sub(r"[^a-z0-9]+", "-", secret_type.lower()).strip("-")


def _plugin(detector: BasePlugin) -> SecretPlugin:
    return SecretPlugin(kind=kind_of(detector.secret_type), detector=detector)


_DETECT_SECRETS: tuple[BasePlugin, ...] = (
    ArtifactoryDetector(),
    AWSKeyDetector(),
    AzureStorageKeyDetector(),
    BasicAuthDetector(),
    CloudantDetector(),
    DiscordBotTokenDetector(),
    GitHubTokenDetector(),
    GitLabTokenDetector(),
    Base64HighEntropyString(limit=4.5),
    IbmCloudIamDetector(),
    IbmCosHmacDetector(),
    JwtTokenDetector(),
    MailchimpDetector(),
    NpmDetector(),
    OpenAIDetector(),
    PrivateKeyDetector(),
    PypiTokenDetector(),
    SendGridDetector(),
    SlackDetector(),
    SoftlayerDetector(),
    SquareOAuthDetector(),
    StripeDetector(),
    TelegramBotTokenDetector(),
    TwilioKeyDetector(),
)

#: "password" (of someone) and a verb or sign introducing its value, in prose
_PROSE_PASSWORD = (
    r"(?i)\b(?:password|passwd|passphrase|pwd)\b(?:\s+(?:for|of)\s+[\w.@-]+)?\s*"
    r"(?:(?:is|was|has been|were)(?:\s+(?:set|changed|reset)\s+to)?|set to|changed to|to|reads|"
    r"[:=])(?:\s*:)?\s*"
)
#: a quoted value, whole (spaces and all): group 1 between the quotes
_QUOTED = r"[\"']((?<=\")[^\"\n]{4,200}(?=\")|(?<=')[^'\n]{4,200}(?='))"
#: a command-line argument: quoted, whole (spaces and all), or one word
_ARGUMENT = r"(?:" + _QUOTED + r"|['\"]?([^\s'\"]+))"
#: what detect-secrets misses; group 1 is the secret
_REGEXES: tuple[tuple[str, re.Pattern[str]], ...] = (
    # a URL whose user is empty: redis://:password@host (BasicAuthDetector needs a user)
    # (to the last @ before the host, as below: redis://:p@ss!w0rd@redis)
    ("connection-string-password", re.compile(r"://:([^\s/]+)@[^\s@/]*")),
    # a URL's password with characters BasicAuthDetector's leaves out (! $ * + = @...):
    # postgres://admin:S3cr3t!@db:5432/app, mongodb://admin:P@ssw0rd@mongo (to the last @)
    ("basic-auth-credentials", re.compile(r"://[^\s:/@]+:([^\s/]+)@[^\s@/]*")),
    # DB_PASSWORD="correct horse battery staple", {"DB_PASSWORD": "correct horse ..."}:
    # a quoted value with spaces, whole (after a key quoted or not)
    (
        "secret-keyword",
        re.compile(
            r"(?i)\b[\w.-]*(?:password|passwd|passphrase|pwd)[\w.-]*[\"']?\s*[:=]\s*" + _QUOTED
        ),
    ),
    # {\"password\": \"hunter22\"}: a JSON document inside a JSON string, quotes escaped
    (
        "secret-keyword",
        re.compile(
            r"(?i)\b[\w.-]*(?:password|passwd|passphrase|pwd)[\w.-]*\\\"\s*[:=]\s*"
            r"\\\"([^\"\\\n]{4,200})\\\""
        ),
    ),
    # **DB_PASSWORD**: hunter22, | DB_PASSWORD | hunter22 |: a key in Markdown
    (
        "secret-keyword",
        re.compile(
            r"(?i)\b[\w.-]*(?:password|passwd|passphrase|pwd)[\w.-]*[*_`]*\s*[:=|]\s*[*_`]*"
            r"((?=[^\s|*`\"']*[\d!@#$%^&+=?~])[^\s|*`\"']{4,})"
        ),
    ),
    # a Google API key; a Slack app-level token (SlackDetector knows the xox? ones)
    ("google-api-key", re.compile(r"(?<![\w-])(AIza[0-9A-Za-z_-]{35})(?![\w-])")),
    ("slack-token", re.compile(r"(?<![\w-])(xapp-\d-[A-Za-z0-9-]{20,})")),
    # a GitHub fine-grained token (GitHubTokenDetector knows the gh?_ prefixes only)
    ("github-token", re.compile(r"(?<![\w-])(github_pat_[A-Za-z0-9_]{40,})")),
    # any PEM private key's BEGIN line (PrivateKeyDetector lists some kinds; ENCRYPTED
    # PRIVATE KEY, PKCS#8's encrypted form, is not among them): the block is redacted
    # from its BEGIN line to its END line
    ("private-key", re.compile(r"(-----BEGIN [A-Z0-9 ]*PRIVATE KEY[A-Z ]*-----)")),
    # Authorization: Bearer <token>
    ("bearer-token", re.compile(r"(?i)\bbearer\s+([A-Za-z0-9._~+/-]{16,}=*)")),
    # GITHUB_TOKEN=..., access_token: ... (detect-secrets' keywords lack "token")
    (
        "token",
        re.compile(
            r"(?i)\b[\w.-]*(?:token|client[_-]?secret)[\w.-]*\\?[\"']?\s*[:=]\s*\\?[\"']?"
            r"((?=[A-Za-z0-9._~+/=-]*\d)(?=[A-Za-z0-9._~+/=-]*[A-Za-z])[A-Za-z0-9._~+/=-]{12,})"
        ),
    ),
    # sk-<48 alphanumerics>, sk-proj-<...>: a pod name (sk-learn-5d8f-x2x) has short segments
    (
        "openai-token",
        re.compile(
            r"(?<![\w-])(sk-(?:(?:proj|svcacct|admin)-[A-Za-z0-9_-]{20,}"
            r"|(?=[A-Za-z0-9]*\d)[A-Za-z0-9]{20,}))(?![\w-])"
        ),
    ),
    # Authorization: Basic <base64 of user:password> (a digit, + / or = rules out "basic auth")
    (
        "basic-auth-credentials",
        re.compile(
            r"(?i)(?<![\w-])basic\s+((?=[A-Za-z0-9+/]*[0-9+/=])[A-Za-z0-9+/]{8,}={0,2})(?![\w+/=])"
        ),
    ),
    (
        "basic-auth-credentials",
        re.compile(r"(?i)\bauthorization[\"']?\s*[:=]\s*[\"']?basic\s+([A-Za-z0-9+/]{4,}={0,2})"),
    ),
    # the password is hunter2 / password was S3cr3t! / passwd for admin: "x y"
    (
        "secret-keyword",
        re.compile(
            _PROSE_PASSWORD + r"((?=[^\s\"'“”]*[\d!@#$%^&*+=?~])[^\s\"'“”]{4,}?)"
            r"(?=[.,;:)]*(?:[\s\"'”]|$))"
        ),
    ),
    ("secret-keyword", re.compile(_PROSE_PASSWORD + r"[\"'“]([^\s\"'“”]{4,})[\"'”]")),
    # the password is "correct horse battery staple": a quoted value with spaces, whole
    ("secret-keyword", re.compile(_PROSE_PASSWORD + r"(?:" + _QUOTED + r"|“([^“”\n]{4,200})”)")),
    # password 'hunter2' / passwd "x y": a quoted value right after the word
    (
        "secret-keyword",
        re.compile(r"(?i)\b(?:password|passwd|passphrase|pwd)\s+[\"'“]([^\"'“”\n]{4,}?)[\"'”]"),
    ),
    # secret <AWS secret access key>: 40 characters of base64 after "secret"
    (
        "aws-secret-access-key",
        re.compile(
            r"(?i)\bsecret(?:[_ -]?access)?(?:[_ -]?key)?[\"']?\s*(?:[:=]|is)?\s*[\"']?"
            r"((?=[A-Za-z0-9/+]*[0-9/+])(?=[A-Za-z0-9/+]*[a-z])(?=[A-Za-z0-9/+]*[A-Z])"
            r"[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])"
        ),
    ),
    # mysql -uroot -pS3cret, -p"a b" (the password attached to -p; -P is the port)
    (
        "command-line-password",
        re.compile(r"(?i:\bmysql(?:dump|admin|import|sh|slap|check)?)\b[^\n|;&]*?\s-p" + _ARGUMENT),
    ),
    # redis-cli -a S3cret / --pass 'a b'
    (
        "command-line-password",
        re.compile(r"(?i)\bredis-cli\b[^\n|;&]*?\s(?:-a|--pass)\s+" + _ARGUMENT),
    ),
    # --password=S3cret / --password "a b", for any command
    ("command-line-password", re.compile(r"(?i)(?<![\w-])--password[=\s]+" + _ARGUMENT)),
    # Cookie: session=...; other=... (every cookie of the header: any may be a session),
    # also as a JSON or Python key ({"Cookie": "session=..."}), escaped or not
    (
        "cookie",
        re.compile(
            r"(?i)\b(?:set-)?cookie\\?[\"']?\s*:\s*\\?[\"']?"
            r"([^\s\"'\\][^\n\"']*?)(?=\s*(?:\\?[\"']|$))"
        ),
    ),
    # curl --cookie 'session=...' / -b 'session=...'
    ("cookie", re.compile(r"(?<![\w-])(?:--cookie|-b)\s+['\"]?([\w.-]+=[^\s'\"]+)")),
)

#: an env var's name that is a credential's: DB_PASSWORD, GITHUB_TOKEN, CLIENT_SECRET,
#: STRIPE_API_KEY, AWS_SECRET_ACCESS_KEY (the word last); not TOKEN_TTL or SECRET_NAME
_CREDENTIAL_NAME = (
    r"[\w.-]*?(?:password|passwd|pwd|token|secret|api[_-]?key)(?:[_-]?(?:access[_-]?)?key)?s?"
)
#: a YAML or JSON value: double-quoted (quotes escaped too, inside a JSON string),
#: single-quoted, or plain (to a comment, a comma, a closing bracket or the end of the line)
_ENTRY_VALUE = (
    r"(?:\\\"([^\"\\\n]{4,200})\\\"|\"([^\"\n]{4,200})\"|'([^'\n]{4,200})'"
    r"|([^\s\"'#,{}\[\]][^\n,{}\]]*?)(?=[ \t]*(?:[,}\]]|\s#|$)))"
)
#: a Kubernetes env entry named like a credential: ``- name: DB_PASSWORD`` with ``value:
#: hunter22`` on the next line, or ``{"name": "DB_PASSWORD", "value": "hunter22"}`` (also
#: inside a JSON string: ``{\"name\": ...}``). The value may be on another line than the
#: name, so this runs over the whole text, not line by line; the secret is in group 1 to 4
ENV_ENTRY: tuple[str, re.Pattern[str]] = (
    "secret-keyword",
    re.compile(
        r"(?i)(?<![\w-])\\?[\"']?name\\?[\"']?[ \t]*:[ \t]*\\?[\"']?"  # - name: / {"name": "
        f"{_CREDENTIAL_NAME}\\\\?[\"']?(?![\\w.-])"  # DB_PASSWORD", then at most one line break
        r"[ \t]*,?[ \t]*(?:\r?\n[ \t]*)?\\?[\"']?value\\?[\"']?[ \t]*:[ \t]*"
        f"{_ENTRY_VALUE}",
        re.MULTILINE,
    ),
)

#: every detector, in the order they run
PLUGINS: tuple[SecretPlugin, ...] = (
    *(_plugin(d) for d in _DETECT_SECRETS),
    SecretPlugin(kind="secret-keyword", detector=KeywordDetector(), keyword=True),
    SecretPlugin(kind="secret-keyword", detector=KeywordDetector(), keyword=True, config_mode=True),
    *(SecretPlugin(kind=kind, detector=pattern) for kind, pattern in _REGEXES),
)
