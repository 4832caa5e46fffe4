//! The formats, as data. Every example here is made up.

use crate::TokenFormat;

const B: TokenFormat = TokenFormat::BASE;

/// The formats, most specific first: where two match at one place, the
/// first wins (`sk-ant-` before `sk-`). The generic shapes (`Bearer`,
/// assignments, URLs, JWTs, PEM blocks) come last.
///
/// Every prefix needs a byte that is rare in ordinary output (punctuation,
/// an upper-case letter): streams are searched for the rarest byte of each
/// prefix, and an all-lower-case prefix such as Databricks' `dapi` (left
/// out) or a lower-case `bearer ` made redaction of plain text about three
/// times slower.
pub const FORMATS: &[TokenFormat] = &[
    // AI providers.
    TokenFormat {
        id: "anthropic-key",
        prefixes: &["sk-ant-"],
        regex: r"sk-ant-[A-Za-z0-9_-]{20,}",
        needs_digit: true,
        example: "sk-ant-api03-Xq3vB8nR2kL5mT9wE1yU6iO4pA7sD0fG-hJ2kL5zX8cV1bN4mQ7wE0rT3yU6iAA",
        not_examples: &["sk-ant-short1", "sk-ant-without-any-digits-at-all-here"],
        ..B
    },
    TokenFormat {
        id: "openai-key",
        prefixes: &["sk-"],
        regex: r"sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}",
        needs_digit: true,
        example: "sk-proj-4f9aB7cD2eF0gH1iJ3kL5mN7oP9qR1sT3uV5wX7yZ9",
        not_examples: &[
            "pip install sk-learn==0.24.2",
            "task-0123456789abcdefghijklmn",
            "sk-this-is-a-long-hyphenated-css-class-name",
            "disk-1234567890abcdefghijklmnop",
        ],
        ..B
    },
    TokenFormat {
        id: "groq-key",
        prefixes: &["gsk_"],
        regex: r"gsk_[A-Za-z0-9]{52}",
        example: "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",
        not_examples: &[
            "gsk_short0123",
            "gsk_I7tggiMIXcil8d113JFmlUpfMlN35YE5ioMglUkJPKAWLuEF4McGx",
        ],
        ..B
    },
    TokenFormat {
        id: "xai-key",
        prefixes: &["xai-"],
        regex: r"xai-[A-Za-z0-9]{80}",
        example: "xai-hWKYoWKV2jSH9Ckqeha812vSHooKXRTskNEzd6odFJlEaaVMBvCs2wtw3mvvjVgIIoGJQ4nUnCO8NCSf",
        not_examples: &["xai-sdk", "pip install xai-grok-client-0123"],
        ..B
    },
    TokenFormat {
        id: "replicate-token",
        prefixes: &["r8_"],
        regex: r"r8_[A-Za-z0-9]{37}",
        needs_digit: true,
        example: "r8_SHM5ia4AreOKtewJ0lUCy6OhFWmxI0HnwIuDv",
        not_examples: &["r8_register", "xr8_SHM5ia4AreOKtewJ0lUCy6OhFWmxI0HnwIuDv"],
        ..B
    },
    TokenFormat {
        id: "perplexity-key",
        prefixes: &["pplx-"],
        regex: r"pplx-[A-Za-z0-9]{48}",
        example: "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",
        not_examples: &["pplx-api-client"],
        ..B
    },
    TokenFormat {
        id: "huggingface-token",
        prefixes: &["hf_"],
        regex: r"hf_[A-Za-z0-9]{30,}",
        body: r"[A-Za-z0-9]",
        example: "hf_kQ8vR3nT6wY9zB2mL5pX7cD1fG4hJ0sAqW",
        not_examples: &[
            "hf_transfer",
            "self.hf_config_dictionary_for_the_model_loader",
        ],
        ..B
    },
    // Code hosting and package registries.
    TokenFormat {
        id: "github-token",
        prefixes: &["ghp_", "gho_", "ghu_", "ghs_", "ghr_"],
        regex: r"gh[pousr]_[A-Za-z0-9]{36,}",
        body: r"[A-Za-z0-9]",
        edge: r"[A-Za-z0-9]",
        example: "ghp_R4nd0mL00k1ngT0k3nW1thTh1rtySixChr5x",
        not_examples: &["ghp_short0123", "the ghp_ prefix alone"],
        ..B
    },
    TokenFormat {
        id: "github-pat",
        prefixes: &["github_pat_"],
        regex: r"github_pat_[A-Za-z0-9_]{22,}",
        body: r"[A-Za-z0-9_]",
        edge: r"[A-Za-z0-9_]",
        example: "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789ab",
        not_examples: &["github_pat_short"],
        ..B
    },
    TokenFormat {
        id: "gitlab-token",
        prefixes: &["glpat-"],
        regex: r"glpat-[A-Za-z0-9_-]{20,}",
        example: "glpat-xR7kP2mN9qL4vB8tY3wZ",
        not_examples: &["glpat-short"],
        ..B
    },
    TokenFormat {
        id: "gitlab-deploy-token",
        prefixes: &["gldt-"],
        regex: r"gldt-[A-Za-z0-9_-]{20,}",
        needs_digit: true,
        example: "gldt-6pF0eU6OKPfN1BXAVdQC",
        not_examples: &["gldt-short", "gldt-deploy-token-documentation"],
        ..B
    },
    TokenFormat {
        id: "gitlab-runner-token",
        prefixes: &["glrt-"],
        regex: r"glrt-[A-Za-z0-9_-]{20,}",
        needs_digit: true,
        example: "glrt-wa20PEqiN8vNPoT0Hjgz",
        not_examples: &["glrt-short", "glrt-runner-authentication-token"],
        ..B
    },
    TokenFormat {
        id: "gitlab-trigger-token",
        prefixes: &["glptt-"],
        regex: r"glptt-[0-9a-f]{40}",
        example: "glptt-9125e48150e4bd29eeb0b585fb1756f2aa1ca398",
        not_examples: &["glptt-9125e48150e4bd29"],
        ..B
    },
    TokenFormat {
        id: "npm-token",
        prefixes: &["npm_"],
        regex: r"npm_[A-Za-z0-9]{36}",
        body: r"[A-Za-z0-9]",
        example: "npm_kQ8vR3nT6wY9zB2mL5pX7cD1fG4hJ0sAqWer",
        not_examples: &["npm_config_cache=/root/.npm", "npm_package_name"],
        ..B
    },
    TokenFormat {
        id: "pypi-token",
        prefixes: &["pypi-AgEIcHlwaS5vcmc"],
        regex: r"pypi-AgEIcHlwaS5vcmc[A-Za-z0-9_-]{50,}",
        example: "pypi-AgEIcHlwaS5vcmcCJDk0NTZmNzA4LTk2YjAtNDY5NS1iMjMwLWUxZTZlNzYyZjY1ZAACKlsz",
        not_examples: &["pypi-AgEIcHlwaS5vcmc"],
        ..B
    },
    TokenFormat {
        id: "rubygems-key",
        prefixes: &["rubygems_"],
        regex: r"rubygems_[0-9a-f]{48}",
        example: "rubygems_edf2ed952bd110dc336037af2d452e6708035988ab9264d0",
        not_examples: &["rubygems_version", "rubygems_edf2ed952bd110dc"],
        ..B
    },
    TokenFormat {
        id: "docker-pat",
        prefixes: &["dckr_pat_"],
        regex: r"dckr_pat_[A-Za-z0-9_-]{27,}",
        example: "dckr_pat_FaGb5c2vWhC1fJyqq_yb-4_ykXu",
        not_examples: &["dckr_pat_short"],
        ..B
    },
    // Chat, mail and payments.
    TokenFormat {
        id: "slack-token",
        prefixes: &["xoxa-", "xoxb-", "xoxo-", "xoxp-", "xoxr-", "xoxs-"],
        regex: r"xox[aboprs]-[A-Za-z0-9-]{10,}",
        body: r"[A-Za-z0-9-]",
        edge: r"[A-Za-z0-9-]",
        needs_digit: true,
        example: "xoxb-2741859306-5823019467-kQ8vR3nT6wY9zB2mL5pX7cD1",
        not_examples: &["xoxb-", "xoxb-not-a-token-just-words"],
        ..B
    },
    TokenFormat {
        id: "slack-app-token",
        prefixes: &["xapp-"],
        regex: r"xapp-[0-9]-[A-Z0-9]{6,}-[0-9]{6,}-[a-f0-9]{32,}",
        body: r"[A-Za-z0-9-]",
        edge: r"[A-Za-z0-9-]",
        example: "xapp-1-A09FT33S6HB-4378810905349-31dde05b067c6ac2b1522974ef37b80f59e6d964a173f27da9143c2b6505e1e1",
        not_examples: &["xapp-1-A09FT33S6HB", "wxapp-1-config"],
        ..B
    },
    TokenFormat {
        id: "slack-webhook",
        prefixes: &[
            "hooks.slack.com/services/",
            "hooks.slack.com/workflows/",
            "hooks.slack.com/triggers/",
        ],
        regex: r"hooks\.slack\.com/(?:services/T[A-Z0-9]{6,}/B[A-Z0-9]{6,}/[A-Za-z0-9]{20,}|(?:workflows|triggers)/T[A-Z0-9]{6,}/[A-Za-z0-9/]{20,})",
        body: r"[A-Za-z0-9/]",
        edge: r"[A-Za-z0-9]",
        example: "https://hooks.slack.com/services/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",
        not_examples: &[
            "https://hooks.slack.com/services/",
            "POST to https://hooks.slack.com/services/YOUR/WEBHOOK/URL",
        ],
        ..B
    },
    TokenFormat {
        id: "discord-webhook",
        prefixes: &["discord.com/api/webhooks/", "discordapp.com/api/webhooks/"],
        regex: r"discord(?:app)?\.com/api/webhooks/[0-9]{17,20}/[A-Za-z0-9_-]{60,68}",
        body: r"[A-Za-z0-9_/-]",
        example: "https://discord.com/api/webhooks/978171249758865917/SU9M_yCECSnNLvZ_I1Hdxo7fh5EHmotFM3HJfwh6pkFRtocDdG-Ra2kcVKmpwtwcK_fV",
        not_examples: &["https://discord.com/api/webhooks/{id}/{token}"],
        ..B
    },
    TokenFormat {
        id: "telegram-bot-token",
        prefixes: &[":AA"],
        regex: r":(AA[A-Za-z0-9_-]{33})",
        preceded_by: r"[0-9]",
        example: "9041307993:AA4brKLicTjZAqxjCCKETGTS4mZjKxjFu66",
        not_examples: &[
            "port:AA4brKLicTjZAqxjCCKETGTS4mZjKxjFu66",
            "9041307993:AA4brKLicTjZAqxjCCKETGTS4mZjKxjFu66x",
            "12:AAAA",
        ],
        ..B
    },
    TokenFormat {
        id: "sendgrid-key",
        prefixes: &["SG."],
        regex: r"SG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}",
        body: r"[A-Za-z0-9_.-]",
        edge: r"[A-Za-z0-9_.-]",
        example: "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",
        not_examples: &[
            "SG.short",
            "MSG.kQ8vR3nT6wY9zB2mL5pX7c.D1fG4hJ0sAqWeRtYuIoPaSdFgHjKlZxCvBnMqWeRtYu",
        ],
        ..B
    },
    TokenFormat {
        id: "mailgun-key",
        prefixes: &["key-"],
        regex: r"key-[0-9a-f]{32}",
        edge: r"[A-Za-z0-9]",
        needs_digit: true,
        example: "key-d3b66c52f171af11e43fd137dbcfe0c3",
        not_examples: &["monkey-d3b66c52f171af11e43fd137dbcfe0c3", "key-value-store"],
        ..B
    },
    TokenFormat {
        id: "twilio-api-key",
        prefixes: &["SK"],
        regex: r"SK[0-9a-fA-F]{32}",
        body: r"[A-Za-z0-9]",
        edge: r"[A-Za-z0-9]",
        needs_digit: true,
        example: "SK6f879ed1fce63984133bedfc7d492e8d",
        not_examples: &["TASK6f879ed1fce63984133bedfc7d492e8d", "SKIP_TESTS=1"],
        ..B
    },
    TokenFormat {
        id: "twilio-account-sid",
        prefixes: &["AC"],
        regex: r"AC[0-9a-f]{32}",
        body: r"[A-Za-z0-9]",
        edge: r"[A-Za-z0-9]",
        needs_digit: true,
        example: "ACf11f0f28558fefcd3e7f0d61ca289fb7",
        not_examples: &["ACCEPT_EULA=Y", "BACf11f0f28558fefcd3e7f0d61ca289fb7"],
        ..B
    },
    TokenFormat {
        id: "stripe-key",
        prefixes: &["sk_live_", "rk_live_", "sk_test_", "rk_test_"],
        regex: r"[sr]k_(?:live|test)_[A-Za-z0-9]{20,}",
        body: r"[A-Za-z0-9]",
        example: "sk_live_51HbQ7xKz9vR3nT6wY9zB2mL5pX",
        not_examples: &["sk_live_short", "risk_live_51HbQ7xKz9vR3nT6wY9zB2mL5pX"],
        ..B
    },
    TokenFormat {
        id: "stripe-webhook-secret",
        prefixes: &["whsec_"],
        regex: r"whsec_[A-Za-z0-9]{32,}",
        body: r"[A-Za-z0-9]",
        example: "whsec_SLhFPjvDv9rVVmLvqmXAGDIieBPBz2OR",
        not_examples: &["whsec_short"],
        ..B
    },
    TokenFormat {
        id: "square-token",
        prefixes: &["sq0atp-", "sq0csp-"],
        regex: r"sq0(?:atp|csp)-[A-Za-z0-9_-]{22,43}",
        example: "sq0atp-IL_galVePzo0FrJ4-HfldK",
        not_examples: &["sq0atp-short"],
        ..B
    },
    TokenFormat {
        id: "shopify-access-token",
        prefixes: &["shpat_", "shpca_", "shppa_"],
        regex: r"shp(?:at|ca|pa)_[0-9a-fA-F]{32}",
        example: "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",
        not_examples: &["shpat_9c0e967a3f3a23dee654270478"],
        ..B
    },
    TokenFormat {
        id: "shopify-shared-secret",
        prefixes: &["shpss_"],
        regex: r"shpss_[0-9a-fA-F]{32}",
        example: "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",
        not_examples: &["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0"],
        ..B
    },
    // Cloud, infrastructure and observability.
    TokenFormat {
        id: "aws-access-key-id",
        prefixes: &["AKIA", "ASIA"],
        regex: r"A[KS]IA[A-Z0-9]{16}",
        body: r"[A-Z0-9]",
        edge: r"[A-Za-z0-9]",
        example: "AKIAIOSFODNN7EXAMPLE",
        not_examples: &["AKIAFOO", "XAKIAIOSFODNN7EXAMPLE", "AKIAIOSFODNN7EXAMPLE0"],
        ..B
    },
    TokenFormat {
        id: "aws-secret-key",
        prefixes: &[
            "aws_secret_access_key",
            "AWS_SECRET_ACCESS_KEY",
            "SecretAccessKey",
        ],
        regex: r#"(?:aws_secret_access_key|AWS_SECRET_ACCESS_KEY|SecretAccessKey)["']?[ \t]*[=:][ \t]*["']?([A-Za-z0-9/+]{40})(?:[^A-Za-z0-9/+]|\z)"#,
        body: r#"[A-Za-z0-9/+= \t"':]"#,
        edge: "",
        example: "aws_secret_access_key = XR33uipr3ysK/XQwIQlmj+v1dbbxG/cN9p+0YXPP",
        not_examples: &[
            "aws_secret_access_key = ${AWS_SECRET_ACCESS_KEY}",
            "aws_secret_access_key = XR33uipr3ysK/XQwIQlmj+v1dbbxG/cN9p+0YXPPX",
        ],
        ..B
    },
    TokenFormat {
        id: "google-api-key",
        prefixes: &["AIza"],
        regex: r"AIza[A-Za-z0-9_-]{35}",
        example: "AIzaSyA1bC2dE3fG4hI5jK6lM7nO8pQ9rS0tUvW",
        not_examples: &["AIzaShort"],
        ..B
    },
    TokenFormat {
        id: "google-oauth-token",
        prefixes: &["ya29."],
        regex: r"ya29\.[A-Za-z0-9_-]{30,}",
        needs_digit: true,
        example: "ya29.a0AfH6SMBx3kQ8vR3nT6wY9zB2mL5pX7cD1fG4hJ0",
        not_examples: &["ya29.short"],
        ..B
    },
    TokenFormat {
        id: "gcp-service-account-key",
        prefixes: &[r#""private_key""#],
        regex: r#""private_key"\s*:\s*"(-----BEGIN [A-Z ]*PRIVATE KEY-----[A-Za-z0-9+/=\\]*?-----END [A-Z ]*PRIVATE KEY-----(?:\\n)?)""#,
        body: r#"[A-Za-z0-9+/=\\ :"-]"#,
        edge: "",
        max_len: 16 * 1024,
        example: r#""private_key": "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7\n-----END PRIVATE KEY-----\n""#,
        not_examples: &[r#""private_key": """#, r#""private_key_id": "a1b2c3""#],
        ..B
    },
    TokenFormat {
        id: "azure-storage-key",
        prefixes: &["AccountKey="],
        regex: r"AccountKey=([A-Za-z0-9+/]{40,}={0,2})",
        body: r"[A-Za-z0-9+/=]",
        edge: "",
        example: "DefaultEndpointsProtocol=https;AccountName=demo;AccountKey=8TysKoEx0zTPE18yJi4BohxVcp9xELN44FlROcAndF8D+AyduTTy/2HPiIfFM4i+cPdn9kFr7ReFbb0ymSvAgL==;EndpointSuffix=core.windows.net",
        not_examples: &["AccountKey=", "AccountKey=<your key>"],
        ..B
    },
    TokenFormat {
        id: "azure-shared-access-key",
        prefixes: &["SharedAccessKey="],
        regex: r"SharedAccessKey=([A-Za-z0-9+/]{40,}={0,2})",
        body: r"[A-Za-z0-9+/=]",
        edge: "",
        example: "Endpoint=sb://demo.servicebus.windows.net/;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=d1oTAQ3uO7lwTAyw+3Okcy54L3fwJEKDzsYodmzAuAZ=",
        not_examples: &["SharedAccessKeyName=RootManageSharedAccessKey"],
        ..B
    },
    TokenFormat {
        id: "digitalocean-token",
        prefixes: &["dop_v1_", "doo_v1_", "dor_v1_"],
        regex: r"do[por]_v1_[0-9a-f]{64}",
        example: "dop_v1_78073d03878e7f475f2bf0a07c6b815b4692732364a05799f5433cae072ab441",
        not_examples: &["dop_v1_78073d03878e7f47"],
        ..B
    },
    TokenFormat {
        id: "heroku-api-key",
        prefixes: &["HRKU-"],
        regex: r"HRKU-[A-Za-z0-9_-]{30,}",
        needs_digit: true,
        example: "HRKU-AAa7LZMmBqgs53BrogvUSSkzX8wL5s7ngTgE6VAtGwl7O150RPPXzXI-E2P9",
        not_examples: &["HRKU-short1"],
        ..B
    },
    TokenFormat {
        id: "vault-token",
        prefixes: &["hvs.", "hvb.", "hvr."],
        regex: r"hv[sbr]\.[A-Za-z0-9_-]{24,}",
        edge: r"[A-Za-z0-9_.-]",
        needs_digit: true,
        example: "hvs.CAESIMuXo0JHU53e8U29F_4emOKB983-6vWSQDznXtJZKV17PHYaL2q5LbGF51v_JXCwnaNq9a-MySlsPoZikLUDbEPgO84",
        not_examples: &["hvs.short1", "thvs.CAESIMuXo0JHU53e8U29F_4emOKB983"],
        ..B
    },
    TokenFormat {
        id: "doppler-token",
        prefixes: &[
            "dp.pt.",
            "dp.st.",
            "dp.ct.",
            "dp.sa.",
            "dp.scim.",
            "dp.audit.",
        ],
        regex: r"dp\.(?:pt|st|ct|sa|scim|audit)\.[A-Za-z0-9]{40,}",
        body: r"[A-Za-z0-9]",
        edge: r"[A-Za-z0-9_.-]",
        example: "dp.pt.IeMr5zFxHpWM7eeje3tZCOx4NLhg64jLEMBFrZWVTfo",
        not_examples: &["dp.pt.short"],
        ..B
    },
    TokenFormat {
        id: "pulumi-token",
        prefixes: &["pul-"],
        regex: r"pul-[0-9a-f]{40}",
        example: "pul-ee7e7b1f991a39aa9f750cf4721b02cb8d490bf9",
        not_examples: &["pul-request", "pul-ee7e7b1f991a39aa9f75"],
        ..B
    },
    TokenFormat {
        id: "terraform-cloud-token",
        prefixes: &[".atlasv1."],
        regex: r"\.atlasv1\.([A-Za-z0-9_-]{60,})",
        preceded_by: r"[A-Za-z0-9]",
        example: "rAKAiLKCoB0Wvq.atlasv1.Ld18LBJoFdMoQkqfyU0I5rEu4iKTKksLj_mOPzfZRRxMclROWOn_kONWNEUBa96_Q9T",
        not_examples: &[
            "see .atlasv1.Ld18LBJoFdMoQkqfyU0I5rEu4iKTKksLj_mOPzfZRRxMclROWOn_kONWNEUBa96_Q9T",
        ],
        ..B
    },
    TokenFormat {
        id: "planetscale-token",
        prefixes: &["pscale_tkn_", "pscale_pw_", "pscale_oauth_"],
        regex: r"pscale_(?:tkn|pw|oauth)_[A-Za-z0-9_.-]{32,64}",
        body: r"[A-Za-z0-9_.-]",
        example: "pscale_tkn_xeEQhUiDjRrHv2RbwswOv5lU6_dRfC2wS2125hsfjhn",
        not_examples: &["pscale_tkn_short"],
        ..B
    },
    TokenFormat {
        id: "supabase-token",
        prefixes: &["sbp_"],
        regex: r"sbp_[0-9a-f]{40}",
        example: "sbp_290eb22983dfebc395b457b3f886fc328f6b2cec",
        not_examples: &["sbp_290eb22983dfebc3"],
        ..B
    },
    TokenFormat {
        id: "netlify-token",
        prefixes: &["nfp_"],
        regex: r"nfp_[A-Za-z0-9]{36}",
        needs_digit: true,
        example: "nfp_jEga5vOCr4VK4xuvhChSNCQL2W0LyBvsXr2T",
        not_examples: &["nfp_short"],
        ..B
    },
    TokenFormat {
        id: "grafana-service-account-token",
        prefixes: &["glsa_"],
        regex: r"glsa_[A-Za-z0-9]{32}_[0-9a-f]{8}",
        example: "glsa_6rALTOuvVm9HFfiaMnHdP4KnK5wpHK5f_0e7f5bc2",
        not_examples: &["glsa_6rALTOuvVm9HFfiaMnHdP4KnK5wpHK5f"],
        ..B
    },
    TokenFormat {
        id: "grafana-cloud-token",
        prefixes: &["glc_"],
        regex: r"glc_[A-Za-z0-9+/]{32,}={0,2}",
        body: r"[A-Za-z0-9+/=]",
        edge: r"[A-Za-z0-9+/_-]",
        example: "glc_eyJvIjoid2vQ6/HWpCeaKYk1wT62i0Wsb8JRDbJqCAp5HGIrE0mkvU4lVhZm0VrdyCJp==",
        not_examples: &["glc_short=="],
        ..B
    },
    TokenFormat {
        id: "newrelic-key",
        prefixes: &["NRAK-", "NRII-"],
        regex: r"NRAK-[A-Z0-9]{27}|NRII-[A-Za-z0-9_-]{32}",
        example: "NRAK-33FD2V18H38KZAUFYVF0IW3XQOC",
        not_examples: &["NRAK-33FD2V18H38KZ"],
        ..B
    },
    TokenFormat {
        id: "sentry-token",
        prefixes: &["sntrys_", "sntryu_"],
        regex: r"sntrys_[A-Za-z0-9+/=_]{50,}|sntryu_[0-9a-f]{64}",
        body: r"[A-Za-z0-9+/=_]",
        edge: r"[A-Za-z0-9+/_-]",
        example: "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",
        not_examples: &["sntrys_short", "sntryu_dff29e83478d121875e458fe029d6701"],
        ..B
    },
    TokenFormat {
        id: "dynatrace-token",
        prefixes: &["dt0c01."],
        regex: r"dt0c01\.[A-Z0-9]{24}\.[A-Z0-9]{64}",
        body: r"[A-Za-z0-9.]",
        edge: r"[A-Za-z0-9.]",
        example: "dt0c01.3QSZ6HJDBUKVYB0S9B4IFSG3.INK750P3M9O32FLD3X2LLLG2AEGOPPF3VOWNGT7R7G0X3Z8ORCOOLHQV3O5Q9K71",
        not_examples: &["dt0c01.3QSZ6HJDBUKVYB0S9B4IFSG3"],
        ..B
    },
    TokenFormat {
        id: "atlassian-token",
        prefixes: &["ATATT3"],
        regex: r"ATATT3[A-Za-z0-9_=-]{100,}",
        body: r"[A-Za-z0-9_=-]",
        edge: r"[A-Za-z0-9_-]",
        example: "ATATT3xFfGF0XEZhb4HEqxo_xiTQb4Ji5A4ENF5FFrD7uqp3F3uV_sbbdNju_XyLyNMGoYOA76mvWE6afv9ZZcaet3AODCAvwmCieR9p97KEttf002AFAq-DjUAM2jA9kX2Op-3vWzBFOGFT_uhSwR0o4hs5NL01akLSpDhVrLa688ieu0q6Bi=9O6CCBO1",
        not_examples: &["ATATT3xFfGF0short"],
        ..B
    },
    TokenFormat {
        id: "linear-api-key",
        prefixes: &["lin_api_"],
        regex: r"lin_api_[A-Za-z0-9]{40}",
        example: "lin_api_SZ0MVaF0p0WePeIYgYRcf6HMRhr0tz6TPl0ly3yM",
        not_examples: &["lin_api_version"],
        ..B
    },
    TokenFormat {
        id: "notion-token",
        prefixes: &["ntn_", "secret_"],
        regex: r"ntn_[A-Za-z0-9]{40,50}|secret_[A-Za-z0-9]{43}",
        body: r"[A-Za-z0-9]",
        needs_digit: true,
        example: "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",
        not_examples: &[
            "secret_key_base",
            "client_secret_7fSERbev2wxMYovTpTwde2JCcsYjPae5IaZ3inp1NRQ",
        ],
        ..B
    },
    TokenFormat {
        id: "postman-api-key",
        prefixes: &["PMAK-"],
        regex: r"PMAK-[0-9a-f]{24}-[0-9a-f]{34}",
        example: "PMAK-d9b16e4b80ad521dcece65e4-e725df482e4e93eba52e1ed55a4c55473b",
        not_examples: &["PMAK-d9b16e4b80ad521dcece65e4"],
        ..B
    },
    TokenFormat {
        id: "mapbox-secret-token",
        prefixes: &["sk.eyJ"],
        regex: r"sk\.eyJ[A-Za-z0-9_-]{20,}\.[A-Za-z0-9_-]{20,}",
        body: r"[A-Za-z0-9_.-]",
        example: "sk.eyJ1IjoiZXhhbXBsZSIsImEiOiJjHEqVdIqKb7In0.qN8WIAjI5CpUixz2smO7mg",
        not_examples: &["sk.eyJ1Ijoi"],
        ..B
    },
    TokenFormat {
        id: "age-secret-key",
        prefixes: &["AGE-SECRET-KEY-1"],
        regex: r"AGE-SECRET-KEY-1[A-Z0-9]{58}",
        body: r"[A-Z0-9]",
        edge: r"[A-Za-z0-9]",
        example: "AGE-SECRET-KEY-1HUALEZ7AQ64E7F61YV6MT3TIWEM31ZEVN3J49AHSNRM99ONCIUAATEQV1C",
        not_examples: &["AGE-SECRET-KEY-1HUALEZ7AQ"],
        ..B
    },
    // Generic shapes.
    TokenFormat {
        id: "private-key",
        prefixes: &["-----BEGIN "],
        regex: r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----(?:[A-Za-z0-9+/=\s:,.\\-]*?-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|[A-Za-z0-9+/=\s:,.\\-]*)",
        body: r"[A-Za-z0-9+/=\s:,.\\-]",
        edge: "",
        max_len: 16 * 1024,
        example: "-----BEGIN RSA PRIVATE KEY-----\nGuo6MQ7xXacdekPv1M3Kf9VIkksrjndb9M5X2ggltj5LFyIMi8po6y4T/8lhrScJ\n1QZR9UB7KdsFWjYqE1E6kSu7AwsB1+Y3PuM9D6dcsfJZh1P1Mj7uDL8KCOQx6mYs\nvZORjIgXR6WdmDpzFsbcd+/uEIZX4j6yr7yeKTmn2xHzydNNihTA/qu/ZTh7/nXV\n-----END RSA PRIVATE KEY-----",
        not_examples: &[
            "-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIU\n-----END CERTIFICATE-----",
            "-----BEGIN PUBLIC KEY-----\nMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE\n-----END PUBLIC KEY-----",
        ],
        ..B
    },
    TokenFormat {
        id: "jwt",
        prefixes: &["eyJ"],
        regex: r"eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}",
        body: r"[A-Za-z0-9_.-]",
        example: "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkphbmUifQ.XGVSZhbJjJEAHmGG-5323O34S8ix3P5cvA8aav5EfN3",
        not_examples: &[
            "eyJhbGciOiJIUzI1NiJ9",
            "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0",
        ],
        ..B
    },
    TokenFormat {
        id: "bearer-token",
        prefixes: &["Bearer ", "BEARER "],
        regex: r"B(?:earer|EARER) ([A-Za-z0-9._~+/-]{16,}=*)",
        body: r"[A-Za-z0-9._~+/=-]",
        needs_digit: true,
        example: "Authorization: Bearer CsMj0kYPiKFofGHMS88KZ09xCV8Z6lrlqGApoQhA",
        not_examples: &[
            "Bearer authentication is described in RFC 6750",
            "-H \"Authorization: Bearer $API_TOKEN\"",
            "Bearer <token>",
        ],
        ..B
    },
    TokenFormat {
        id: "basic-auth",
        prefixes: &[
            "Authorization: Basic ",
            "authorization: Basic ",
            "authorization: basic ",
        ],
        regex: r"[Aa]uthorization: [Bb]asic ([A-Za-z0-9+/]{8,}={0,2})",
        body: r"[A-Za-z0-9+/=]",
        edge: r"[A-Za-z0-9+/]",
        example: "Authorization: Basic YWRtaW46o4JnGjW9KxwOgs0F==",
        not_examples: &[
            "Authorization: Basic $CREDENTIALS",
            "Authorization: Basic realm",
        ],
        ..B
    },
    TokenFormat {
        id: "password-value",
        prefixes: &["Password=", "password=", "PASSWORD="],
        regex: r#"(?:Password|password|PASSWORD)=["']?([^\s;'"$%{<&][^\s;'"&]{5,})"#,
        body: r"[^\s;&]",
        edge: "",
        example: "Server=db.internal;Database=app;User Id=app;Password=Sup3r-s3cret!;",
        not_examples: &[
            "password=$DB_PASSWORD",
            "Password=${PASS}",
            "password=%s",
            "Password=<your password>",
            "password=abc",
        ],
        ..B
    },
    TokenFormat {
        id: "url-password",
        prefixes: &["://"],
        regex: r"://[^\s/?#@:]*:([^\s/?#@]+)@",
        body: r"[^\s/?#@]",
        edge: "",
        example: "postgres://app:s3cr3t-Passw0rd@db.internal:5432/app",
        not_examples: &[
            "https://example.com:8080/path",
            "ssh://git@github.com/owner/repo.git",
            "http://[::1]:8080/",
        ],
        ..B
    },
];

/// Ordinary text no format may match: prose, hashes, identifiers,
/// encodings, environment lines.
pub const NOT_SECRETS: &[&str] = &[
    "Use sk-learn (scikit-learn) for the model; see the task-1234 notes.",
    "3f786850e387550fdab836ed7e6dc881de23001b",
    "123e4567-e89b-12d3-a456-426614174000",
    "VGhlIHF1aWNrIGJyb3duIGZveCBqdW1wcyBvdmVyIHRoZSBsYXp5IGRvZw==",
    "SGVsbG8sIHRoaXMgaXMgYW4gb3JkaW5hcnkgc2VudGVuY2UgaW4gYmFzZTY0Lg==",
    "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "https://docs.rs/regex/latest/regex/ and git@github.com:owner/repo.git",
    "LS_COLORS=rs=0:di=01;34:ln=01;36:mh=00:pi=40;33:so=01;35:do=01;35",
    "PWD=/home/user/project OLDPWD=/home/user SSH_AUTH_SOCK=/tmp/ssh-XXXX/agent.1234",
    "Authorization header: use Bearer tokens, see the API docs.",
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl user@host",
    "2024-05-01 12:30:45 INFO ACCEPTED task SKIPPED key-value store ready",
];
