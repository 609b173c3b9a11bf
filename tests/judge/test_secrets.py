"""Credentials in diagnoses are found and redacted; only kinds and positions are kept."""

from __future__ import annotations

import json

import pytest

from judge.backends.scripted import ScriptedBackend, scripted_reply
from judge.grader import Grader
from judge.review_reasons import ReviewReason
from judge.rubric import load_rubric_dir
from judge.screening import screen
from judge.secrets import REDACTION_MARKER, has_redactions, redact

AWS_KEY = "AKIAIOSFODNN7EXAMPLE"
PEM = (
    "-----BEGIN RSA PRIVATE KEY-----\n"
    "MIIEowIBAAKCAQEAx8kq2dJ0Vw6lq3p1M0wF9hY5qV2YpYl1fYgS8Qm0m3kYxLhT\n"
    "Zm9vYmFyYmF6cXV4cXV1eHF1dXo0NTY3ODkwYWJjZGVmZ2hpamtsbW5vcHFyc3R1\n"
    "-----END RSA PRIVATE KEY-----"
)


def _assert_redacted(text: str, secret: str, kind: str) -> None:
    """``secret`` is gone from the text and from the records, marked as ``kind``, and
    redacting the result again finds nothing."""
    result = redact(text)
    assert secret not in result.text
    assert f"[REDACTED:{kind}]" in result.text
    assert secret not in json.dumps(result.records())
    assert redact(result.text).findings == ()


@pytest.mark.parametrize(
    ("text", "secret", "kind"),
    [
        (f"The pod's env has {AWS_KEY} as its access key.", AWS_KEY, "aws-access-key"),
        (
            'aws_secret_access_key = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"',
            "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
            "aws-access-key",
        ),
        ("Environment:\n  DB_PASSWORD:  hunter22\n", "hunter22", "secret-keyword"),
        ('the config sets password = "s3cr3t!x"', "s3cr3t!x", "secret-keyword"),
        (
            "DSN postgres://app:Sup3rS3cret@db.hotel:5432/users refuses logins",
            "Sup3rS3cret",
            "basic-auth-credentials",
        ),
        (
            "redis://:r3dispass@redis:6379/0 is unreachable",
            "r3dispass",
            "connection-string-password",
        ),
        (
            "Server=db;User Id=sa;Password=Secr3t!9;Database=orders",
            "Secr3t!9",
            "secret-keyword",
        ),
        (
            "curl -H 'Authorization: Bearer abcdef0123456789abcdef0123456789' fails",
            "abcdef0123456789abcdef0123456789",
            "bearer-token",
        ),
        (
            "GITHUB_TOKEN=ghp_16C7e42F292c6912E7710c838347Ae178B4a was revoked",
            "ghp_16C7e42F292c6912E7710c838347Ae178B4a",
            "github-token",
        ),
        (
            "the token eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0"
            ".dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U expired",
            "dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
            "json-web-token",
        ),
        ("SESSION_TOKEN=a81bc0d9e7f64c2b9a3d expired", "a81bc0d9e7f64c2b9a3d", "token"),
        (f"the mounted key is\n{PEM}\nand nginx fails", "MIIEowIBAAKCAQEA", "private-key"),
        (
            f"the secret holds\n{PEM.replace('RSA', 'ENCRYPTED')}\nand the pod fails",
            "MIIEowIBAAKCAQEA",
            "private-key",
        ),
        *(
            (f"DSN postgres://admin:{pw}@db:5432/app refuses logins", pw, "basic-auth-credentials")
            for pw in ("S3cr3t!x", "pa$$w0rd", "Hunter2*", "p+ss=w0rd")
        ),
        (
            "CI used github_pat_11ABCDEFG0kZ9xQ2rT7uVw_8Lm3Np5Qr7St9Uv1Wx3Yz5Ab7Cd9Ef1Gh3Ij5Kl7"
            "Mn9Op1Qr3St5Uv7Wx9Yz1Ab3C, since revoked",
            "github_pat_11ABCDEFG0kZ9xQ2rT7uVw",
            "github-token",
        ),
        (
            "maps calls fail with key AIzaSyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY now",
            "AIzaSyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY",
            "google-api-key",
        ),
        (
            "the bot runs with xapp-1-A0123BCDEFG-1234567890123-0123456789abcdef0123 set",
            "xapp-1-A0123BCDEFG-1234567890123",
            "slack-token",
        ),
    ],
)
def test_credentials_are_replaced_by_their_kind(text: str, secret: str, kind: str) -> None:
    result = redact(text)
    assert secret not in result.text
    assert f"[REDACTED:{kind}]" in result.text
    assert kind in result.kinds
    assert secret not in json.dumps(result.records())


def test_positions_point_at_the_secret_in_the_submitted_text() -> None:
    text = f"user-service leaks {AWS_KEY} in its logs; rotate {AWS_KEY} now"
    result = redact(text)
    assert [(f.kind, text[f.start : f.end]) for f in result.findings] == [
        ("aws-access-key", AWS_KEY),
        ("aws-access-key", AWS_KEY),
    ]
    assert result.records()[0] == {
        "kind": "aws-access-key",
        "start": 19,
        "end": 39,
        "line": 1,
    }
    assert result.text == (
        "user-service leaks [REDACTED:aws-access-key] in its logs; "
        "rotate [REDACTED:aws-access-key] now"
    )


def test_a_value_pasted_again_elsewhere_is_redacted_too() -> None:
    result = redact("DB_PASSWORD=hunter22\nI tried logging in with hunter22 and it failed")
    assert "hunter22" not in result.text
    assert len(result.findings) == 2


def test_several_secrets_on_one_line_are_all_found() -> None:
    result = redact("password=a1b2c3d4 user_password=zzz999yyy api_key=Q9w8e7r6t5y4u3i2")
    assert result.kinds == ("secret-keyword",)
    assert len(result.findings) == 3
    assert not any(s in result.text for s in ("a1b2c3d4", "zzz999yyy", "Q9w8e7r6t5y4u3i2"))


def test_the_whole_private_key_block_goes() -> None:
    result = redact(f"key:\n{PEM}\nafter that the pod failed")
    assert result.text == "key:\n[REDACTED:private-key]\nafter that the pod failed"


@pytest.mark.parametrize(
    "text",
    [
        "The user-service deployment sets USER_PORT=9999 while its Service targets 8086.",
        "The Secret: db-credentials is missing, so the pod crashes.",
        "secretKeyRef: name: mysql-pass key: password",
        "MYSQL_ROOT_PASSWORD: <set to the key 'password' in secret 'mysql'>",
        "image sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        'digest "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"',
        "The memory limit is 128Mi; the password is rejected, so logins fail.",
        "Traffic from 34.120.8.9 is dropped by the network policy.",
        "TOKEN_TTL=3600 expires sessions hourly.",
    ],
)
def test_ordinary_diagnoses_are_left_alone(text: str) -> None:
    result = redact(text)
    assert result.text == text
    assert result.findings == ()


def test_redaction_is_idempotent() -> None:
    once = redact(f"key {AWS_KEY}; DB_PASSWORD: hunter22; {PEM}")
    twice = redact(once.text)
    assert twice.text == once.text
    assert twice.findings == ()
    assert has_redactions(once.text)
    assert len(REDACTION_MARKER.findall(once.text)) == 3


@pytest.mark.parametrize(
    "hidden",
    [
        "ＡＫＩＡＩＯＳＦＯＤＮＮ７ＥＸＡＭＰＬＥ",  # full-width: NFKC makes it the plain key
        "AKIA\u200bIOSFODNN7EXAMPLE",  # a zero-width space the prompt would strip
    ],
)
def test_keys_hidden_behind_lookalikes_are_found_in_the_normal_form(hidden: str) -> None:
    result = redact(f"the access key {hidden} leaked")
    assert result.normalized
    assert result.text == "the access key [REDACTED:aws-access-key] leaked"
    assert result.records()[0]["normalized"] is True


def test_secrets_anywhere_on_a_very_long_line_are_found() -> None:
    # long lines are scanned in overlapping windows; nothing may slip through the seams
    values = [f"Pw{i:04d}x{i * 7:05d}" for i in range(300)]
    line = " ".join(
        f"db_password={v};" if i % 2 else f"key {AWS_KEY[:-4]}{i:04d}" for i, v in enumerate(values)
    )
    result = redact(line)
    assert not any(v in result.text for i, v in enumerate(values) if i % 2)
    assert "AKIA" not in result.text
    assert len(result.findings) == 300


@pytest.mark.parametrize(
    ("text", "secret", "kind"),
    [
        (
            "the pod logs sk-abcdEFGH1234ijklMNOP5678qrstUVWX9876zyxw on start",
            "sk-abcdEFGH1234ijklMNOP5678qrstUVWX9876zyxw",
            "openai-token",
        ),
        (
            "OPENAI_API_KEY is sk-proj-Abc123Def456Ghi789Jkl012Mno345Pqr678_Stu-901 and is revoked",
            "sk-proj-Abc123Def456Ghi789Jkl012Mno345Pqr678_Stu-901",
            "openai-token",
        ),
        (
            "curl -H 'Authorization: Basic YWRtaW46aHVudGVyMjI=' gets a 401",
            "YWRtaW46aHVudGVyMjI=",
            "basic-auth-credentials",
        ),
        ("authorization: basic dXNlcjpwYXNz was sent", "dXNlcjpwYXNz", "basic-auth-credentials"),
        (
            "the probe sends Basic YWRtaW46czNjcjN0 to /admin",
            "YWRtaW46czNjcjN0",
            "basic-auth-credentials",
        ),
        ("I found that the password is hunter2.", "hunter2", "secret-keyword"),
        ("the admin password was S3cr3t! before the rotation", "S3cr3t!", "secret-keyword"),
        (
            "logged in as root with password: Tr0ub4dor&3 and it failed",
            "Tr0ub4dor&3",
            "secret-keyword",
        ),
        ("The password for root is p@ssw0rd, so anyone can log in", "p@ssw0rd", "secret-keyword"),
        ('the chart sets the password to "swordfish" for everyone', "swordfish", "secret-keyword"),
        ("the password was changed to Winter2024 last week", "Winter2024", "secret-keyword"),
    ],
)
def test_bare_keys_basic_auth_and_prose_passwords_are_redacted(
    text: str, secret: str, kind: str
) -> None:
    # issue 19, item 10: these three forms reached the judge and the database in clear
    _assert_redacted(text, secret, kind)


@pytest.mark.parametrize(
    "text",
    [
        "The password is rejected, so logins fail.",
        "the password was rotated yesterday and the pods kept the old one",
        "password is missing from the Secret, so the pod crashes",
        "the password is 128 characters long",
        "pod sk-learn-model-server-5d8f7b9c6-x2xkq crashed with OOMKilled",
        "The task-runner uses sk-learn 1.4; the risk-score service is fine.",
        "basic auth fails because Basic authentication is disabled on the ingress",
        "Basic health checks pass on 8080.",
    ],
)
def test_ordinary_mentions_of_passwords_keys_and_basic_auth_stay(text: str) -> None:
    result = redact(text)
    assert result.text == text
    assert result.findings == ()


@pytest.mark.parametrize(
    ("text", "secret", "kind"),
    [
        (
            "the app reads aws secret wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY from its env",
            "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
            "aws-secret-access-key",
        ),
        (
            "secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
            "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
            "aws-secret-access-key",
        ),
        ("the init job connects with password 'hunter2' and fails", "hunter2", "secret-keyword"),
        ("the cron runs mysql -uroot -pS3cretPass orders", "S3cretPass", "command-line-password"),
        ("mysqldump -u app -p'Tr0ub4dor' -P 3306 shop", "Tr0ub4dor", "command-line-password"),
        (
            'curl -H "Cookie: session=eyJhbGciOi1234abcd; theme=dark" http://cart/api',
            "session=eyJhbGciOi1234abcd",
            "cookie",
        ),
        ("Cookie: session=abc123def456ghi", "abc123def456ghi", "cookie"),
        ("probe: redis-cli -h cache -a S3cr3tPass ping", "S3cr3tPass", "command-line-password"),
        ("psql-wrapper --password=hunter22 -d app", "hunter22", "command-line-password"),
        # quoted values with spaces, whole; prose with "is:"; keys in Markdown
        ('DB_PASSWORD="correct horse battery staple"', "horse battery staple", "secret-keyword"),
        ("password: 'correct horse battery staple'", "horse battery staple", "secret-keyword"),
        ('mysql -uroot --password="orange lemon" shop', "orange lemon", "secret-keyword"),
        ("the password is: hunter22", "hunter22", "secret-keyword"),
        ("**DB_PASSWORD**: hunter22", "hunter22", "secret-keyword"),
        ("| DB_PASSWORD | hunter22 |", "hunter22", "secret-keyword"),
        # a URL password holding @, read to the last @ (not the scheme)
        (
            "the DSN is mongodb://admin:P@ssw0rd@mongo:27017/app",
            "P@ssw0rd",
            "basic-auth-credentials",
        ),
        ("postgres://admin:p@ss!word1@db:5432/app", "p@ss!word1", "basic-auth-credentials"),
    ],
)
def test_credentials_on_command_lines_cookies_and_aws_secrets_are_redacted(
    text: str, secret: str, kind: str
) -> None:
    _assert_redacted(text, secret, kind)


@pytest.mark.parametrize(
    "text",
    [
        "mysql -p orders prompts for the password, so the job hangs",
        "mysql -P 3306 -h db.internal is refused",
        "redis-cli ping returns PONG; the secret mounted in the pod is missing",
        "the cookie banner covers the checkout button",
        "the AWS secret is rotated every 90 days by the operator",
        # where the password is, not the password: a variable, a template, a placeholder
        "The manifest sets password: ${DB_PASSWORD}, which is never substituted.",
        "the password is $PGPASSWORD from the Secret",
        "| password | required |",
        "connect with --password=<password> as the docs say",
    ],
)
def test_commands_and_words_without_a_credential_stay(text: str) -> None:
    result = redact(text)
    assert result.text == text
    assert result.findings == ()


@pytest.mark.parametrize(
    ("text", "secret", "kind"),
    [
        # a quoted value with spaces under a quoted key (an env dump or a ConfigMap as JSON)
        (
            '{"DB_PASSWORD": "correct horse battery staple"}',
            "horse battery staple",
            "secret-keyword",
        ),
        ('{"password":"correct horse battery staple"}', "horse battery staple", "secret-keyword"),
        (
            "{'DB_PASSWORD': 'correct horse battery staple'}",
            "horse battery staple",
            "secret-keyword",
        ),
        # a quoted value with spaces in prose
        ('the password is "correct horse battery staple"', "horse battery", "secret-keyword"),
        (
            'The DB password was "correct horse battery staple" in the secret',
            "horse battery",
            "secret-keyword",
        ),
        ("password is: 'correct horse battery staple'", "horse battery", "secret-keyword"),
        (
            "the password is \u201ccorrect horse battery staple\u201d",
            "horse battery",
            "secret-keyword",
        ),
        # an @ in the password of a URL without a user, read to the last @
        ("redis://:Pa55@word!@redis-master:6379/0", "word!", "connection-string-password"),
        ("REDIS_URL=redis://:s3cr3t@2024x@redis:6379", "2024x", "connection-string-password"),
        ("redis://:p@ss!w0rd@redis:6379", "ss!w0rd", "connection-string-password"),
        # a JSON document pasted inside a JSON string, its quotes escaped
        ('log: msg="{\\"db_password\\":\\"hunter22\\"}"', "hunter22", "secret-keyword"),
        ('{\\"password\\": \\"hunter22\\"}', "hunter22", "secret-keyword"),
    ],
)
def test_quoted_values_with_spaces_at_signs_in_urls_and_escaped_json_are_redacted_whole(
    text: str, secret: str, kind: str
) -> None:
    _assert_redacted(text, secret, kind)


def test_the_text_as_sent_is_masked_where_the_normal_form_held_a_credential() -> None:
    """What may be quoted of a text whose credential showed only in its normal form: the
    text as sent (its disguised letters kept), the credential's piece replaced."""
    hidden = "".join(chr(ord(c) + 0xFEE0) for c in AWS_KEY)  # full-width letters
    text = f"\uff34he access key {hidden} leaked"
    result = redact(text)
    assert result.normalized
    assert result.masked(text) == "\uff34he access key [REDACTED:aws-access-key] leaked"
    plain = f"the key {AWS_KEY} leaked"
    assert redact(plain).masked(plain) == redact(plain).text


#: a correct diagnosis of a deleted Secret, quoting the pod spec that mounts it
SECRET_TRUTH = (
    "[fault_spec] component=secret/frontend-tls; namespace=online-boutique || The TLS "
    "Secret frontend-tls mounted by the frontend deployment was deleted, so frontend pods "
    "cannot start."
)
SECRET_DIAGNOSIS = (
    "Root cause: the Secret frontend-tls in namespace online-boutique was deleted. The "
    "frontend deployment mounts it as a volume:\n\n"
    "  volumes:\n"
    "  - name: certs\n"
    "    secret:\n"
    "      secretName: frontend-tls\n\n"
    "so every frontend pod is stuck in ContainerCreating (MountVolume.SetUp failed), and "
    "the storefront is down for all users."
)


@pytest.mark.parametrize(
    "text",
    [
        SECRET_DIAGNOSIS,
        "tls:\n- hosts:\n  - shop.example.com\n  secretName: shop-example-tls\n",
        '"volumes": [{"name": "certs", "secret": {"secretName": "frontend-tls"}}]',
        "envFrom:\n- secretRef: db-credentials\n",
        "the env var reads secretKeyRef: db-credentials, which is gone",
        "existingSecret: mysql-creds",
        "helm install db bitnami/mysql --set auth.existingSecret=mysql-creds",
        "existingSecretPasswordKey: mysql-root-password",
        "passwordSecretName: db-pass-2024",
        "tokenSecretRef: oauth2-proxy-client2",
    ],
)
def test_keys_that_name_a_kubernetes_secret_keep_their_value(text: str) -> None:
    """A key that names a Secret object (``secretName``, ``secretRef``, ``secretKeyRef``,
    ``existingSecret``) is a reference, not a credential: its value and the object's
    name elsewhere in the diagnosis stay readable."""
    result = redact(text)
    assert result.text == text
    assert result.findings == ()


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("SECRET_KEY: s3cr3tkey9", "s3cr3tkey9"),
        ("secret_key: abc123def", "abc123def"),
        ("clientSecret: Zx9-abc-123-def", "Zx9-abc-123-def"),
    ],
)
def test_keys_that_hold_a_secret_themselves_are_still_redacted(text: str, secret: str) -> None:
    """A key naming a secret's value (``SECRET_KEY``, ``clientSecret``), not an object
    holding it, still has its value redacted."""
    _assert_redacted(text, secret, "secret-keyword")


def test_a_deleted_secret_diagnosis_is_not_flagged_as_leaking_a_credential() -> None:
    """Screening a diagnosis of a deleted Secret keeps the Secret's name everywhere and
    does not report a leaked credential."""
    screened = screen(SECRET_DIAGNOSIS)
    assert "secretName: frontend-tls" in screened.text
    assert "the Secret frontend-tls in namespace" in screened.text
    assert ReviewReason.CREDENTIAL_LEAKED not in screened.review_reasons


async def test_a_correct_deleted_secret_diagnosis_keeps_its_component() -> None:
    """A correct diagnosis of a deleted Secret names its component to the checks in code:
    a judge's yes on localization stands, and the pass is not held as overruled."""
    rubric = load_rubric_dir()["sregym-rca"]
    result = await Grader(ScriptedBackend([scripted_reply])).grade(
        rubric, SECRET_TRUTH, SECRET_DIAGNOSIS
    )
    d1q1 = next(a for a in result.answers if a.question_id == "D1-Q1")
    assert d1q1.answer, d1q1.veto
    assert ReviewReason.JUDGE_OVERRULED not in result.review_reasons


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        (
            "kubectl get deploy user-service -o yaml shows:\n"
            "        env:\n"
            "        - name: DB_PASSWORD\n"
            "          value: hunter22\n",
            "hunter22",
        ),
        (
            '        env:\n          - name: POSTGRES_PASSWORD\n            value: "hunter22"\n',
            "hunter22",
        ),
        ("- name: CLIENT_SECRET\n  value: 's3cr3t value'  # from vault", "s3cr3t value"),
        ('"env": [{"name": "DB_PASSWORD", "value": "hunter22"}]', "hunter22"),
        (
            '"env": [\n  {\n    "name": "GITHUB_TOKEN",\n    "value": "abc-123-xyz"\n  }\n]',
            "abc-123",
        ),
        ("env: [{name: STRIPE_API_KEY, value: sk_live_abcdef}]", "sk_live_abcdef"),
        (
            "- name: AWS_SECRET_ACCESS_KEY\n  value: wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
            "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        ),
    ],
)
def test_a_credential_in_a_pod_env_entry_is_redacted(text: str, secret: str) -> None:
    """The value of a pod's env entry named like a credential (``- name: DB_PASSWORD``
    then ``value: ...``, in YAML or JSON) is redacted, and the grading flags it."""
    _assert_redacted(text, secret, "secret-keyword")
    assert ReviewReason.CREDENTIAL_LEAKED in screen(text).review_reasons


@pytest.mark.parametrize(
    "text",
    [
        "- name: DB_PASSWORD\n  value: $(MYSQL_PASSWORD)",
        '- name: DB_PASSWORD\n  value: "${MYSQL_PASSWORD}"',
        "- name: DB_PASSWORD\n  value: <password>",
        "- name: DB_PASSWORD\n  valueFrom:\n    secretKeyRef:\n      name: mysql-pass\n"
        "      key: password",
        '- name: TOKEN_TTL\n  value: "3600"',
        "- name: SECRET_NAME\n  value: frontend-tls",
        "- name: PASSWORD_FILE\n  value: /run/secrets/db",
        '- name: USER_PORT\n  value: "9999"',
    ],
)
def test_env_entries_without_a_credential_value_stay(text: str) -> None:
    """An env entry whose value refers to a credential (``$(VAR)``, ``${VAR}``,
    ``valueFrom``) or whose name is not a credential's is left as it is."""
    result = redact(text)
    assert result.text == text
    assert result.findings == ()


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        (
            "POSTGRES_PASSWORD: postgres is set on the database. The postgresql statefulset "
            "is healthy.",
            "The postgresql statefulset",
        ),
        (
            "MONGO_INITDB_ROOT_PASSWORD: mongodb, and mongodb-geo crashes with auth errors",
            "and mongodb-geo crashes",
        ),
        (
            "POSTGRES_PASSWORD: postgres; the app connects to postgres.default.svc:5432",
            "connects to postgres.default.svc:5432",
        ),
    ],
)
def test_other_occurrences_of_a_value_are_redacted_only_as_whole_words(
    text: str, kept: str
) -> None:
    """A found value is redacted again where it stands alone, never inside a longer name
    (``postgres`` in ``postgresql``, ``mongodb-geo``, ``postgres.default.svc``)."""
    redacted = redact(text).text
    assert kept in redacted, redacted
    assert redacted.startswith(text.split(":")[0] + ": [REDACTED:secret-keyword]"), redacted


def test_a_value_pasted_again_is_redacted_at_the_end_of_a_sentence() -> None:
    """The same value pasted again is redacted also before punctuation."""
    result = redact("DB_PASSWORD: hunter22\nI tried hunter22, then hunter22.")
    assert "hunter22" not in result.text
    assert result.text.endswith("then [REDACTED:secret-keyword].")


def test_a_value_that_ends_a_sentence_is_redacted_in_another_text_without_its_period() -> None:
    """A password found at the end of a sentence (``DB_PASSWORD=pw.``, where a detector
    takes in the period) is redacted in the other texts of the submission that show it
    without the period."""
    diagnosis = "user-service sets DB_PASSWORD=Zx81pq77wQ."
    known = redact(diagnosis).values_in(diagnosis)
    other = redact("checkout logs in with Zx81pq77wQ and fails", known=known)
    assert other.text == "checkout logs in with [REDACTED:secret-keyword] and fails"


def test_many_known_values_are_each_redacted_with_their_kind() -> None:
    """Many values found elsewhere are each redacted here with their own kind, as whole
    words, never inside a marker already in the text."""
    known = {f"pw{n:04d}xyz": "secret-keyword" for n in range(1000)}
    known["tk0007xyz"] = "token"
    text = "a pw0999xyz b tk0007xyz c pw0001xyz-geo [REDACTED:secret-keyword] pw0001xyz."
    assert redact(text, known=known).text == (
        "a [REDACTED:secret-keyword] b [REDACTED:token] c pw0001xyz-geo "
        "[REDACTED:secret-keyword] [REDACTED:secret-keyword]."
    )


@pytest.mark.parametrize(
    ("text", "command"),
    [
        (
            "kubectl create secret generic db --from-literal=password=$(openssl rand -hex 16)",
            "$(openssl rand -hex 16)",
        ),
        ("DB_PASSWORD=$(cat /run/secrets/db) ./start.sh", "$(cat /run/secrets/db)"),
    ],
)
def test_a_password_generated_by_a_command_is_left_whole(text: str, command: str) -> None:
    """A value that is a command's output (``$(openssl rand -hex 16)``) says where the
    password comes from: it is left whole, not cut in the middle."""
    result = redact(text)
    assert command in result.text, result.text
    assert result.findings == ()


PASSWORD_HEAD, PASSWORD_TAIL = "Hunt3rAbc", "Zq9wLeak"


@pytest.mark.parametrize(
    "text",
    [
        '{"DB_PASSWORD": "' + PASSWORD_HEAD + '\\"' + PASSWORD_TAIL + '"}',
        'DB_PASSWORD="' + PASSWORD_HEAD + '\\"' + PASSWORD_TAIL + '"',
    ],
)
def test_a_password_with_an_escaped_quote_is_redacted_whole(text: str) -> None:
    """A password holding an escaped quote (``{"DB_PASSWORD": "p\\"w"}``) is redacted to
    the quote that closes it, not only up to the escaped one."""
    redacted = redact(text).text
    assert "[REDACTED:secret-keyword]" in redacted
    assert PASSWORD_HEAD not in redacted and PASSWORD_TAIL not in redacted, redacted


@pytest.mark.parametrize(
    "text",
    [
        "redis-cli -h redis -a 'S3cret " + PASSWORD_TAIL + "' ping",
        'redis-cli --pass "S3cret ' + PASSWORD_TAIL + '" ping',
        'mysql -h db -uroot -p"S3cret ' + PASSWORD_TAIL + '" app',
    ],
)
def test_a_quoted_command_line_password_with_a_space_is_redacted_whole(text: str) -> None:
    """A quoted password on a command line (``redis-cli -a "a b"``, ``mysql -p"a b"``) is
    redacted with every word in it, as ``--password "a b"`` is."""
    redacted = redact(text).text
    assert "[REDACTED:command-line-password]" in redacted
    assert "S3cret" not in redacted and PASSWORD_TAIL not in redacted, redacted


@pytest.mark.parametrize(
    ("escaped", "plain"),
    [
        # a pod's env entry, as `kubectl get pod -o json` prints it, inside a JSON string
        (
            '"{\\"env\\":[{\\"name\\":\\"DB_PASSWORD\\",\\"value\\":\\"'
            + PASSWORD_TAIL
            + '\\"}]}"',
            '{"env":[{"name":"DB_PASSWORD","value":"' + PASSWORD_TAIL + '"}]}',
        ),
        # an access token inside a JSON string
        (
            '"{\\"ACCESS_TOKEN\\": \\"' + PASSWORD_TAIL + '42abc\\"}"',
            '{"ACCESS_TOKEN": "' + PASSWORD_TAIL + '42abc"}',
        ),
    ],
)
def test_json_inside_a_json_string_is_redacted_as_the_plain_json_is(
    escaped: str, plain: str
) -> None:
    """JSON quoted inside a JSON string (its quotes escaped) loses the credentials the
    same JSON loses unquoted: env entries and tokens as well as passwords."""
    assert PASSWORD_TAIL not in redact(plain).text
    redacted = redact(escaped).text
    assert PASSWORD_TAIL not in redacted, redacted


SESSION = "sess-8f3k2p9x7q1w"


@pytest.mark.parametrize(
    "text",
    [
        '{"headers": {"Cookie": "session=' + SESSION + '"}}',
        "{'headers': {'Cookie': 'session=" + SESSION + "'}}",  # a Python repr, as SREGym's
    ],
)
def test_a_cookie_header_written_as_json_is_redacted(text: str) -> None:
    """A ``Cookie`` header written as a JSON or Python key is redacted as a ``Cookie:``
    header line is."""
    redacted = redact(text).text
    assert "[REDACTED:cookie]" in redacted
    assert SESSION not in redacted, redacted


@pytest.mark.parametrize(
    "text",
    [
        'env printed "DB_HOST=mongodb-user\\nUSER_PORT=9999\\nLOG_LEVEL=info" in the pod',
        "env printed DB_PASSWORD=hunter22\\nUSER_PORT=9999\\nLOG_LEVEL=info in the pod",
        'env printed "DB_PASSWORD=${DB_PASSWORD}\\nUSER_PORT=9999\\nLOG_LEVEL=info" in the pod',
    ],
)
def test_what_follows_an_escaped_line_break_is_kept(text: str) -> None:
    """An escaped line break (``\\n`` in a tool's output quoted in a JSON string) ends a
    value as a line break does: the lines after it stay, whatever the line before held."""
    redacted = redact(text).text
    assert "USER_PORT=9999\\nLOG_LEVEL=info" in redacted, redacted
    assert "hunter22" not in redacted


def test_a_reference_before_an_escaped_line_break_is_not_a_credential() -> None:
    """``${DB_PASSWORD}`` before an escaped line break says where the password is, as it
    does at the end of a line: nothing is redacted."""
    text = 'env printed "DB_PASSWORD=${DB_PASSWORD}\\nUSER_PORT=9999" in the pod'
    assert redact(text).findings == ()


ESCAPED_ENV_TRUTH = (
    "[fault_spec] component=deployment/user-service; namespace=hotel-reservation || "
    "The USER_PORT env var of user-service is set to 9999 while its Service targets 8086."
)


async def test_a_correct_diagnosis_quoting_escaped_env_keeps_its_value_for_grounding() -> None:
    """A correct diagnosis quoting a container's env as escaped JSON keeps the fault's
    value (``USER_PORT=9999``) for the checks in code, and is not flagged as leaking a
    credential it does not hold."""
    diagnosis = (
        "The deployment user-service in namespace hotel-reservation is misconfigured: "
        'kubectl exec user-service -- env printed {"out": "DB_HOST=mongodb-user'
        '\\nUSER_PORT=9999\\nLOG_LEVEL=info"}, so its container listens on the wrong port '
        "and every call from frontend to it is refused."
    )
    rubric = load_rubric_dir()["sregym-rca"]
    result = await Grader(ScriptedBackend([scripted_reply])).grade(
        rubric, ESCAPED_ENV_TRUTH, diagnosis
    )
    assert ReviewReason.CREDENTIAL_LEAKED not in result.review_reasons, result.detail
    vetoed = [a.question_id for a in result.answers if a.judge_answer and not a.answer]
    assert vetoed == [], result.detail
