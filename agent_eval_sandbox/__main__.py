from agent_eval_sandbox.cli import main

main()
