// ESLint: typescript-eslint's type-aware rules over every source of the repository (`npm run lint`).
// Formatting is Prettier's alone (.prettierrc): eslint-config-prettier, last, turns off every rule that
// would disagree with it, so ESLint passes on a tree that Prettier has not rewritten yet.
import js from '@eslint/js';
import prettier from 'eslint-config-prettier';
import { defineConfig, globalIgnores } from 'eslint/config';
import globals from 'globals';
import tseslint from 'typescript-eslint';

export default defineConfig(
  globalIgnores(['dist/', 'coverage/', '.ci/venv/', '.hermes-demo/', '.bench-out/', '.build-test-*/', 'reports/', '.stryker-tmp/']),
  js.configs.recommended,
  tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      globals: globals.node,
      parserOptions: {
        // tsconfig.json covers the six source folders; the root configs and the .mjs entry points of the
        // CLI (nine files, over the default's limit of eight) are checked with its default compiler options.
        projectService: {
          allowDefaultProject: ['*.js', '*.ts', 'cli/*.mjs'],
          maximumDefaultProjectFileMatchCount_THIS_WILL_SLOW_DOWN_LINTING: 16,
        },
        tsconfigRootDir: import.meta.dirname,
      },
    },
    linterOptions: { reportUnusedDisableDirectives: 'error' },
    rules: {
      // A promise nobody awaits hides its rejection; a promise where a callback's return is ignored
      // (an event handler, `setTimeout`) runs unobserved. Fire-and-forget is written `void p` with the reason.
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': 'error',
      // `_name` marks a parameter or binding kept for its position (a callback signature, a destructured rest).
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrorsIgnorePattern: '^_', ignoreRestSiblings: true },
      ],
      // A binding declared before the closure that reads it and assigned once after (`let sse; subscribe(() => sse?.…); sse = …`).
      'prefer-const': ['error', { ignoreReadBeforeAssign: true }],
      // Literal non-Errors are refused; a caught value or `signal.reason` is passed on as it came.
      '@typescript-eslint/prefer-promise-reject-errors': ['error', { allowThrowingAny: true, allowThrowingUnknown: true }],
      // Off: an `async` function without `await` is how an implementation of a promise-returning contract
      // (a runner, a handler, a fake server) turns a synchronous throw into a rejection.
      '@typescript-eslint/require-await': 'off',
    },
  },
  {
    // Tests read HTTP bodies, stream entries and Redis replies as `any` on purpose and check them with
    // `expect`; the unsafe-any family would only ask for a cast before each assertion.
    files: ['test/**'],
    rules: {
      '@typescript-eslint/no-explicit-any': 'off',
      '@typescript-eslint/no-unsafe-argument': 'off',
      '@typescript-eslint/no-unsafe-assignment': 'off',
      '@typescript-eslint/no-unsafe-call': 'off',
      '@typescript-eslint/no-unsafe-member-access': 'off',
      '@typescript-eslint/no-unsafe-return': 'off',
    },
  },
  {
    // Render session events (the CLI's lines, the console's HTML), whose JSON fields are `unknown` by type;
    // each field they print is a scalar the worker wrote (objects such as `spend` have typed helpers).
    files: ['cli/event-format.ts', 'gateway/console/event-html.ts'],
    rules: {
      '@typescript-eslint/no-base-to-string': 'off',
      '@typescript-eslint/restrict-template-expressions': 'off',
    },
  },
  {
    // Plain JavaScript has no annotations: JSON.parse and esbuild's plugin API are `any` there.
    files: ['**/*.mjs', '**/*.js'],
    rules: {
      '@typescript-eslint/no-unsafe-argument': 'off',
      '@typescript-eslint/no-unsafe-assignment': 'off',
      '@typescript-eslint/no-unsafe-call': 'off',
      '@typescript-eslint/no-unsafe-member-access': 'off',
      '@typescript-eslint/no-unsafe-return': 'off',
    },
  },
  {
    // The CLI writes to its terminal only through cli/terminal-text.ts, which escapes control characters
    // (text from outside — names, prompts, replies — could otherwise drive the terminal).
    files: ['cli/**/*.ts'],
    ignores: ['cli/terminal-text.ts'],
    rules: {
      'no-console': 'error',
      'no-restricted-syntax': [
        'error',
        {
          selector:
            "MemberExpression[object.type='MemberExpression'][object.object.name='process'][object.property.name=/^std(out|err)$/][property.name='write']",
          message: 'Write to the terminal through cli/terminal-text.ts (printOut, printErr, writeOut, writeErr).',
        },
      ],
    },
  },
  {
    // The web console's page script: a classic browser script, outside the TypeScript project.
    files: ['gateway/console/static/**/*.js'],
    extends: [tseslint.configs.disableTypeChecked],
    languageOptions: { sourceType: 'script', globals: globals.browser },
  },
  prettier,
);
