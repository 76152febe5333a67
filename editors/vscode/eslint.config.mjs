import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', '.tools/**'] },
  ...tseslint.configs.recommended,
  {
    rules: {
      '@typescript-eslint/no-explicit-any': 'off',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_' }],
      'no-restricted-imports': ['error', { paths: [] }],
    },
  },
  {
    files: ['src/protocol/**/*.ts', 'webview/**/*.ts'],
    rules: { 'no-restricted-imports': ['error', { paths: [{ name: 'vscode', message: 'protocol/ and webview/ stay free of the vscode API' }] }] },
  },
);
